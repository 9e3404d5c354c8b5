"""The audit's result: a table of scenario × output → worst relative error, and the findings."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import picture


@dataclass
class Cell:
    """One output (or gradient) in one scenario, against the high-precision reference."""

    #: worst relative error over the entries the reference defines (inf where an inf/NaN appeared)
    error: float = 0.0
    #: entries that are inf or NaN where the reference is finite (or a different inf)
    nonfinite: int = 0
    #: entries compared, and entries skipped because the reference is undefined (NaN)
    compared: int = 0
    undefined: int = 0
    rtol: float = 0.0
    #: a gradient not judged because the exact value is past the dtype's range (the cost is ±inf)
    out_of_range: bool = False

    @property
    def ok(self) -> bool:
        return self.out_of_range or (self.nonfinite == 0 and not self.error > self.rtol)

    def __str__(self) -> str:
        if self.out_of_range:
            return "out of range"
        if self.nonfinite:
            return f"✗ {self.nonfinite} inf/nan"
        if self.compared == 0:
            return "—"
        text = "0" if self.error == 0 else f"{self.error:.0e}"
        return text if self.ok else f"✗ {text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": _json_float(self.error),
            "nonfinite": self.nonfinite,
            "compared": self.compared,
            "undefined": self.undefined,
            "ok": self.ok,
            "out_of_range": self.out_of_range,
        }


@dataclass
class Row:
    """One scenario in one dtype."""

    dtype: str
    scenario: str
    cells: list[Cell]
    #: the provenance line for a failing row (where, what, and the fix)
    finding: str | None = None
    #: the key under which equal findings of several rows are reported once
    finding_key: tuple | None = None
    #: why the row could not run, if it could not
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.cells)

    def to_dict(self, columns: list[str]) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "scenario": self.scenario,
            "ok": self.ok,
            "cells": {name: c.to_dict() for name, c in zip(columns, self.cells)},
            "finding": self.finding,
            "error": self.error,
        }


@dataclass
class AuditReport:
    """What `sg.audit` found: print it, test `report.ok`, or save `report.to_json()`."""

    model: str
    columns: list[str]
    inputs: list[str]
    recognition: bool
    #: (rtol, atol) per dtype name
    tolerance: dict[str, tuple[float, float]]
    rows: list[Row] = field(default_factory=list)
    #: dtypes that could not be audited, with the reason
    skipped: dict[str, str] = field(default_factory=dict)
    #: ops whose reference was computed in float64 for want of an mpmath implementation
    approximated: list[str] = field(default_factory=list)
    #: what recognition rewrites (or would rewrite) in the model, one `explain` line each
    rewrites: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: runs the same audit with recognition the other way (set by `sg.audit`)
    rerun: Callable[[], AuditReport] | None = field(default=None, repr=False, compare=False)
    _other: AuditReport | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when every scenario is within tolerance and no inf/NaN appeared."""
        return all(r.ok for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    @property
    def findings(self) -> list[str]:
        """One line per distinct problem, naming the scenarios where it shows."""
        groups: dict[Any, list[Row]] = {}
        for row in self.failures:
            key = row.finding_key if row.finding_key is not None else (row.finding or row.error, row.dtype)
            groups.setdefault(key, []).append(row)
        lines = []
        for rows in groups.values():
            first = rows[0]
            text = first.finding or f"{first.dtype} {first.scenario}: {first.error}"
            others = [f"{r.dtype} {r.scenario}" for r in rows[1:]]
            if others:
                shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
                text += f" (also: {shown})"
            lines.append(text)
        return lines

    def as_written(self) -> AuditReport:
        """This audit with the formulas as written (recognition off): this report, or the audit rerun."""
        return self if not self.recognition else self._other_way()

    def as_recognised(self) -> AuditReport:
        """This audit with recognition on: this report, or the audit rerun."""
        return self if self.recognition else self._other_way()

    def _other_way(self) -> AuditReport:
        if self._other is None:
            if self.rerun is None:
                raise ValueError("this report cannot rerun its audit: it was not made by sg.audit")
            self._other = self.rerun()
            self._other._other = self
        return self._other

    def _pair(self, compare: bool) -> tuple[AuditReport | None, AuditReport | None]:
        """(as written, as recognised) for the map: both when recognition rewrites something."""
        if compare and self.rewrites and (self.rerun is not None or self._other is not None):
            return self.as_written(), self.as_recognised()
        return (None, self) if self.recognition else (self, None)

    def to_svg(self, compare: bool = True) -> str:
        """The stability map as an SVG document: per output and gradient, a heat map of error.

        With `compare` (and when recognition rewrites something in the model) the audit
        runs once more with recognition the other way, so the map shows the formulas as
        written next to them as recognised.  See `stablegrad.audit.picture`.
        """
        return picture.svg(*self._pair(compare))

    def to_html(self, path: str | Path | None = None, compare: bool = True) -> str:
        """One self-contained HTML page (no scripts, nothing fetched): the map, the formulas
        that break with their source lines, and the rewrites recognition makes; written to
        `path` when given.

        >>> import stablegrad as sg
        >>> def naive(x):
        ...     return sg.log(sg.sum(sg.exp(x)))
        >>> page = sg.audit(naive, {"x": "float64[3]"}, dtypes=["float64"]).to_html()
        >>> "as written" in page and "logsumexp_from_naive" in page
        True
        """
        page = picture.html(*self._pair(compare))
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def plot(self, compare: bool = True):
        """The stability map as a matplotlib figure (needs the `plot` extra: matplotlib)."""
        return picture.figure(*self._pair(compare))

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "ok": self.ok,
            "recognition": self.recognition,
            "inputs": self.inputs,
            "columns": self.columns,
            "tolerance": {d: {"rtol": r, "atol": a} for d, (r, a) in self.tolerance.items()},
            "rows": [r.to_dict(self.columns) for r in self.rows],
            "findings": self.findings,
            "skipped": self.skipped,
            "approximated": self.approximated,
            "rewrites": self.rewrites,
            "seconds": round(self.seconds, 3),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self) -> str:
        mode = "recognition on" if self.recognition else "recognition off: formulas as written"
        tolerances = ", ".join(f"{d} {r:.0e}" for d, (r, _) in self.tolerance.items())
        lines = [
            f"audit of {self.model} ({', '.join(self.inputs)}), {mode}",
            f"worst relative error against a high-precision reference (tolerance {tolerances});",
            "d/dx: the gradient of sum(w · outputs) for fixed weights w",
            "",
        ]
        lines += _table(["dtype", "scenario", *self.columns], [_cells(r) for r in self.rows])
        for dtype, why in self.skipped.items():
            lines.append(f"{dtype}: not audited ({why})")
        if self.approximated:
            lines.append(f"note: reference computed in float64 for {', '.join(sorted(self.approximated))}")
        lines.append("")
        failures = self.failures
        if failures:
            lines.append(f"UNSTABLE: {len(failures)} of {len(self.rows)} scenarios fail")
            lines += [f"  {f}" for f in self.findings]
        else:
            lines.append(f"stable: all {len(self.rows)} scenarios within tolerance")
        return "\n".join(lines)


def _cells(row: Row) -> list[str]:
    if row.error is not None:
        return [row.dtype, row.scenario, f"✗ error: {row.error}"]
    return [row.dtype, row.scenario, *(str(c) for c in row.cells)]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [len(h) for h in header]
    for r in rows:
        for i, text in enumerate(r[: len(widths)]):
            widths[i] = max(widths[i], len(text))
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(t.ljust(w) for t, w in zip(r, widths)).rstrip() + _overflow(r, widths))
    return lines


def _overflow(row: list[str], widths: list[int]) -> str:
    return "  " + "  ".join(row[len(widths) :]) if len(row) > len(widths) else ""


def _json_float(x: float):
    return x if math.isfinite(x) else str(x)
