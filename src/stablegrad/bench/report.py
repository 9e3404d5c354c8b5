"""What the benchmark prints: the machine and the tables (Markdown, to paste into an issue)."""

from __future__ import annotations

import datetime
import importlib.metadata
import math
import os
import platform
import sys
from collections.abc import Sequence

import numpy as np

from .runner import Row, System, installed


def number(value: float | None) -> str:
    """Three significant digits, never an exponent (the table is read by eye, column by column).

    >>> [number(v) for v in (1234.5, 12.34, 1.0, 0.01234, 5.7e-05, 0.0, None)]
    ['1234', '12.3', '1.00', '0.0123', '0.0000570', '0', '—']
    """
    if value is None:
        return "—"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _version(package: str) -> str:
    if not installed(package):
        return "not installed"
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "installed (version unknown)"


def machine_facts(thread_notes: Sequence[str]) -> list[str]:
    """Markdown list items: CPU, cores, OS, library versions, what was done about threads."""
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    jax_version = _version("jax")
    if "jax" in sys.modules and jax_version != "not installed":
        jax_version += f" ({sys.modules['jax'].default_backend()})"
    import stablegrad

    return [
        f"- machine: {cpu_model()}, {cores} cores ({usable} usable by this process), {platform.platform()}",
        f"- Python {platform.python_version()}, NumPy {np.__version__}, Numba {_version('numba')}, "
        f"JAX {jax_version}, stablegrad {stablegrad.__version__}",
        f"- threads, for all systems alike: {'; '.join(thread_notes)}",
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def times_table(rows: Sequence[Row], systems: Sequence[System]) -> list[str]:
    """One row per case, one column per system: median ms per call, or why there is none."""
    lines = [
        "| case | " + " | ".join(s.name for s in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for case in dict.fromkeys(r.case for r in rows):
        cells = {r.system.name: (number(r.ms) if r.status == "ok" else r.status) for r in rows if r.case == case}
        lines.append(f"| {case} | " + " | ".join(cells.get(s.name, "—") for s in systems) + " |")
    return lines


def detail_table(rows: Sequence[Row]) -> list[str]:
    """One row per case and system: the check, ms per call, first call, batch size, the two ratios."""
    lines = [
        "| case | system | check | ms/call | first call (s) | calls/batch | × hand NumPy | × best peer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        peer = f"{number(r.vs_peer)} ({r.best_peer})" if r.vs_peer is not None else "—"
        lines.append(
            f"| {r.case} | {r.system.name} | {r.status} | {number(r.ms)} | {number(r.first_call_s)} | "
            f"{r.number or '—'} | {number(r.vs_numpy)} | {peer} |"
        )
    return lines


def markdown(
    rows: Sequence[Row],
    systems: Sequence[System],
    facts: Sequence[str],
    rounds: int,
    notes: Sequence[str] = (),
    batch_seconds: float = 0.02,
) -> str:
    """The whole report as Markdown: `facts` and `notes` (list items) above the two tables."""
    problems = [f"- {r.case} · {r.system.name}: {r.status}: {r.detail}" for r in rows if r.status != "ok"]
    parts = [
        "## stablegrad bench",
        "",
        *facts,
        *notes,
        "",
        f"Value and gradient, median ms per call over {rounds} round{'s' if rounds != 1 else ''} "
        f"(each round one batch of at least {batch_seconds * 1e3:g} ms per system, the systems in turn). "
        "`sg …` are stablegrad's backends; `hand …` the same formulas written by hand.",
        "",
        *times_table(rows, systems),
        "",
        "Each system's first result is checked against hand NumPy in float64 before it is timed; "
        "WRONG or failed rows are not timed and take no part in the ratios. "
        "first call: building and compiling (graph, `sg.function`, tracing, XLA or Numba) plus one call. "
        "× hand NumPy and × best peer: ms/call over theirs (below 1 is faster); "
        "the best peer is the fastest correct hand-written system.",
        "",
        *detail_table(rows),
    ]
    if problems:
        parts += ["", "Not timed:", *problems]
    return "\n".join(parts) + "\n"
