"""The stability map: the audit as a picture — one heat map per output and gradient.

Rows are the scenarios; for each output (and each gradient) there is a column per dtype
and, when recognition rewrites something in the model, per mode: the formulas *as
written* next to them *as recognised*.  A cell's colour is its worst relative error
against the high-precision reference, measured in units of the dtype's tolerance, so
float64 and float32 read on one scale:

- green, darker the more digits are right: within tolerance;
- orange to red: a finite answer that is wrong by more than the tolerance;
- near-black: inf or NaN where the exact answer is finite;
- grey: nothing to compare (the exact value is undefined, past the dtype's range, or the
  scenario does not exist in that dtype).

`svg` draws the map as inline SVG (no fonts or scripts to fetch); `html` wraps it in one
self-contained page with the formulas that break (and their source lines) and the
rewrites that fired; `figure` draws the same map with matplotlib.
"""

from __future__ import annotations

import html as html_text
import math
from dataclasses import dataclass
from typing import Any, TypeAlias

# report.py draws its reports with this module, so this module cannot import their classes
AuditReport: TypeAlias = Any
Row: TypeAlias = Any

#: cell geometry of the SVG, in pixels
CELL_W, CELL_H, DTYPE_GAP, GROUP_GAP, LABEL_W, HEADER_H, TITLE_H = 50, 18, 4, 16, 118, 52, 24
#: the width of one character of the 10-pixel monospace font, to size the legend
CHAR_W = 6
FONT = "font-family='DejaVu Sans Mono, Menlo, Consolas, monospace'"

GREEN_DEEP, GREEN_PALE = (0x1A, 0x98, 0x50), (0xD9, 0xEF, 0x8B)
ORANGE, RED = (0xFD, 0xAE, 0x61), (0xD7, 0x30, 0x27)
NONFINITE, ROW_ERROR, EMPTY, OUT_OF_RANGE = "#3b0a12", "#7b3294", "#f0f0f0", "#c8c8c8"
#: the ok scale runs from 10⁻⁷ × tolerance (deep green) to the tolerance (pale)
OK_DECADES = 7
#: the failing scale runs from the tolerance (orange) to 10⁶ × tolerance (red)
BAD_DECADES = 6


@dataclass(frozen=True)
class Lane:
    """One column within an output's group: a dtype in one mode."""

    dtype: str
    mode: str
    report: AuditReport


@dataclass(frozen=True)
class Swatch:
    """How one cell is drawn: its fill, the text on it and the tooltip."""

    fill: str
    text: str
    ink: str
    tip: str


def lanes(written: AuditReport | None, recognised: AuditReport | None) -> list[Lane]:
    """The columns of every group: per dtype, as written then as recognised (those given)."""
    reports = [(m, r) for m, r in (("as written", written), ("recognised", recognised)) if r is not None]
    if not reports:
        raise ValueError("the stability map needs at least one report")
    dtypes = list(dict.fromkeys(d for _, r in reports for d in r.tolerance))
    return [Lane(d, mode, r) for d in dtypes for mode, r in reports if d in r.tolerance]


def scenarios(reports: list[AuditReport]) -> list[str]:
    """Every scenario label in the order the audit ran them (float64 has the most)."""
    return list(dict.fromkeys(row.scenario for r in reports for row in r.rows))


def _grid(written, recognised) -> tuple[list[Lane], list[str], list[dict[str, Row]]]:
    """The map's columns, its rows (scenario labels), and per column its report's rows by label."""
    all_lanes = lanes(written, recognised)
    labels = scenarios([lane.report for lane in all_lanes])
    rows = [{row.scenario: row for row in lane.report.rows if row.dtype == lane.dtype} for lane in all_lanes]
    return all_lanes, labels, rows


def swatch(row: Row | None, column: int, rtol: float, where: str) -> Swatch:
    """The colour and text of one cell; `where` names it in the tooltip."""
    if row is None:
        return Swatch(EMPTY, "", "#888888", f"{where}: not run (the scenario does not exist in this dtype)")
    if row.error is not None:
        return Swatch(ROW_ERROR, "error", "#ffffff", f"{where}: could not run: {row.error}")
    cell = row.cells[column]
    if cell.out_of_range:
        return Swatch(OUT_OF_RANGE, "range", "#444444", f"{where}: not judged, the exact value is past the range")
    if cell.nonfinite:
        return Swatch(NONFINITE, "inf/nan", "#ffffff", f"{where}: {cell.nonfinite} of {cell.compared} entries inf/NaN")
    if cell.compared == 0:
        return Swatch(EMPTY, "—", "#888888", f"{where}: nothing to compare (the exact value is undefined)")
    text = "0" if cell.error == 0 else f"{cell.error:.0e}"
    tip = f"{where}: worst relative error {cell.error:.2e} (tolerance {rtol:.0e})"
    decades = math.log10(cell.error / rtol) if cell.error > 0 else -math.inf
    if cell.ok:
        shade = _mix(GREEN_DEEP, GREEN_PALE, min(1.0, max(0.0, 1 + decades / OK_DECADES)))
        return Swatch(shade, text, "#ffffff" if decades < -OK_DECADES / 2 else "#1a1a1a", tip)
    return Swatch(_mix(ORANGE, RED, min(1.0, decades / BAD_DECADES)), text, "#1a1a1a", tip)


def svg(written: AuditReport | None, recognised: AuditReport | None) -> str:
    """The map as one standalone SVG document."""
    all_lanes, labels, rows_by_lane = _grid(written, recognised)
    first = all_lanes[0].report
    # a small gap where the dtype changes, so the float64 and float32 pairs read apart
    offsets, x = [], 0
    for k, lane in enumerate(all_lanes):
        x += DTYPE_GAP if k and lane.dtype != all_lanes[k - 1].dtype else 0
        offsets.append(x)
        x += CELL_W
    group_w = x
    top = TITLE_H + HEADER_H
    legend_y = top + len(labels) * CELL_H + 14
    legend, legend_w = _legend(legend_y)
    width = max(LABEL_W + len(first.columns) * (group_w + GROUP_GAP), legend_w)
    height = legend_y + 24
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' {FONT} font-size='10' role='img' class='stability-map'>",
        f"<title>{_esc(f'Stability map of {first.model}')}</title>",
        f"<rect width='{width}' height='{height}' fill='#ffffff'/>",
        f"<text x='4' y='16' font-size='12' font-weight='bold'>"
        f"{_esc(f'{first.model}: worst relative error against the high-precision reference')}</text>",
    ]
    for y, label in enumerate(labels):
        out.append(f"<text x='{LABEL_W - 6}' y='{top + y * CELL_H + 13}' text-anchor='end'>{_esc(label)}</text>")
    for g, name in enumerate(first.columns):
        x0 = LABEL_W + g * (group_w + GROUP_GAP)
        out.append(
            f"<text x='{x0 + group_w / 2}' y='{TITLE_H + 12}' text-anchor='middle' font-size='11' "
            f"font-weight='bold'>{_esc(name)}</text>"
        )
        for k, lane in enumerate(all_lanes):
            x = x0 + offsets[k]
            out.append(f"<text x='{x + CELL_W / 2}' y='{TITLE_H + 28}' text-anchor='middle'>{_esc(lane.dtype)}</text>")
            out.append(
                f"<text x='{x + CELL_W / 2}' y='{TITLE_H + 42}' text-anchor='middle' font-size='8'>"
                f"{_esc(lane.mode)}</text>"
            )
            rtol = lane.report.tolerance[lane.dtype][0]
            for y, label in enumerate(labels):
                where = f"{name} · {lane.dtype} · {label} · {lane.mode}"
                s = swatch(rows_by_lane[k].get(label), g, rtol, where)
                cy = top + y * CELL_H
                out.append(
                    f"<g><title>{_esc(s.tip)}</title><rect class='cell' x='{x}' y='{cy}' width='{CELL_W - 1}' "
                    f"height='{CELL_H - 1}' fill='{s.fill}'/><text x='{x + CELL_W / 2}' y='{cy + 12}' "
                    f"text-anchor='middle' fill='{s.ink}' font-size='9'>{_esc(s.text)}</text></g>"
                )
    out += legend
    out.append("</svg>")
    return "\n".join(out)


def _legend(y: int) -> tuple[list[str], int]:
    """The colour key on one line, and how wide it is."""
    keys = [
        (_mix(GREEN_DEEP, GREEN_PALE, 0.0), "within tolerance (darker: more digits right)"),
        (_mix(ORANGE, RED, 0.5), "over tolerance"),
        (NONFINITE, "inf/NaN"),
        (OUT_OF_RANGE, "exact value past the range"),
        (EMPTY, "nothing to compare"),
    ]
    out, x = [], 4
    for fill, text in keys:
        out.append(f"<rect x='{x}' y='{y}' width='12' height='12' fill='{fill}' stroke='#999999'/>")
        out.append(f"<text x='{x + 16}' y='{y + 10}'>{_esc(text)}</text>")
        x += 28 + CHAR_W * len(text)
    return out, x


def html(written: AuditReport | None, recognised: AuditReport | None) -> str:
    """One self-contained page: the map, the formulas that break, the rewrites that fired."""
    reports = [(mode, r) for mode, r in (("As written", written), ("As recognised", recognised)) if r is not None]
    first = reports[0][1]
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_esc(f'Stability map: {first.model}')}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Stability map: <code>{_esc(first.model)}</code></h1>",
        f"<p>Inputs {_esc(', '.join(first.inputs))}; tolerance "
        f"{_esc(', '.join(f'{d} {r:.0e}' for d, (r, _) in first.tolerance.items()))} (relative error). "
        "Gradients are those of sum(w · outputs) for fixed weights w. Hover a cell for its numbers.</p>",
        "<ul class='verdicts'>",
    ]
    for mode, r in reports:
        failing = len(r.failures)
        verdict = (
            f"unstable: {failing} of {len(r.rows)} scenarios fail" if failing else f"stable: all {len(r.rows)} pass"
        )
        parts.append(f"<li class='{'bad' if failing else 'good'}'><b>{mode}</b>: {verdict}</li>")
    parts += ["</ul>", f"<figure id='map'>{svg(written, recognised)}</figure>"]
    for mode, r in reports:
        if r.findings:
            parts.append(f"<h2>{mode}: the formulas that break</h2><ol class='findings'>")
            parts += [f"<li>{_esc(line)}</li>" for line in r.findings]
            parts.append("</ol>")
    rewrites = (recognised or first).rewrites
    parts.append("<h2>Rewrites recognition makes</h2>")
    if rewrites:
        parts.append("<ul class='rewrites'>" + "".join(f"<li><code>{_esc(c)}</code></li>" for c in rewrites) + "</ul>")
    else:
        parts.append("<p>None: recognition finds nothing to rewrite in this model.</p>")
    notes = [f"{d}: not audited ({why})" for _, r in reports for d, why in r.skipped.items()]
    if first.approximated:
        notes.append(f"reference computed in float64 for {', '.join(first.approximated)}")
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in dict.fromkeys(notes)) + "</ul>")
    for mode, r in reports:
        parts.append(f"<details><summary>{mode}: the report as text</summary><pre>{_esc(str(r))}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def figure(written: AuditReport | None, recognised: AuditReport | None):
    """The map as a matplotlib figure (needs the `plot` extra)."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise ImportError("AuditReport.plot needs matplotlib: pip install 'stablegrad[plot]'") from exc
    all_lanes, labels, rows_by_lane = _grid(written, recognised)
    first = all_lanes[0].report
    fig, axes = plt.subplots(
        1, len(first.columns), figsize=(1.3 + 0.8 * len(all_lanes) * len(first.columns), 1.2 + 0.26 * len(labels))
    )
    axes = axes if len(first.columns) > 1 else [axes]
    for g, (ax, name) in enumerate(zip(axes, first.columns)):
        for k, lane in enumerate(all_lanes):
            rtol = lane.report.tolerance[lane.dtype][0]
            for y, label in enumerate(labels):
                s = swatch(rows_by_lane[k].get(label), g, rtol, "")
                ax.add_patch(plt.Rectangle((k, y), 0.97, 0.94, color=s.fill))
                ax.text(k + 0.48, y + 0.5, s.text, ha="center", va="center", fontsize=6, color=s.ink)
        ax.set_xlim(0, len(all_lanes))
        ax.set_ylim(len(labels), 0)
        ax.set_xticks([k + 0.5 for k in range(len(all_lanes))])
        ax.set_xticklabels([f"{lane.dtype}\n{lane.mode}" for lane in all_lanes], fontsize=6)
        ax.set_yticks([y + 0.5 for y in range(len(labels))])
        ax.set_yticklabels(labels if g == 0 else [], fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    keys = [(_hex(GREEN_DEEP), "within tolerance"), (_hex(RED), "over tolerance"), (NONFINITE, "inf/NaN")]
    fig.legend(
        handles=[Patch(color=colour, label=text) for colour, text in keys],
        loc="lower center",
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    fig.suptitle(f"{first.model}: worst relative error against the high-precision reference", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return fig


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> str:
    return _hex(tuple(round(x + (y - x) * t) for x, y in zip(a, b)))


def _hex(rgb) -> str:
    return "#" + "".join(f"{int(c):02x}" for c in rgb)


def _esc(text: str) -> str:
    return html_text.escape(str(text), quote=True)


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #1a1a1a; }
code, pre { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 12px; }
figure { margin: 1em 0; overflow-x: auto; }
.verdicts .bad { color: #b2182b; } .verdicts .good { color: #1a7837; }
.findings li, .rewrites li { margin: 0.3em 0; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
"""
