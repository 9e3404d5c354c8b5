"""`stablegrad bench` and `python -m stablegrad.bench`: the arguments, their checks, one run, the report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from ..progress import Bar
from .report import machine_facts, markdown
from .runner import BASELINE, LIBRARIES, SYSTEMS, System, installed, run
from .threads import single_threaded
from .workloads import SIZES, WORKLOADS, cases

EXIT_OK, EXIT_WRONG, EXIT_USAGE = 0, 1, 2
#: a timed batch lasts at least this long: far above perf_counter's resolution and a call's own overhead
BATCH_SECONDS = 0.02
NAMES = {"numpy": "NumPy", "numba": "Numba", "jax": "JAX"}


class UsageError(Exception):
    """A bad argument: reported on one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options, on `parser` (a subcommand's, or its own)."""
    parser.add_argument(
        "--workload",
        default=",".join(WORKLOADS),
        metavar="W1,W3,W5",
        help="the workloads to run, comma-separated (default: all)",
    )
    parser.add_argument(
        "--size",
        default="default",
        metavar="small|default",
        help="default: W1 1000x1000, W3 T=1000, W5 N=10^6; small: W1 100x100, W3 T=50, W5 N=10^4 (a quick check)",
    )
    parser.add_argument(
        "--backends",
        default=None,
        metavar="numpy,numba,jax",
        help="the libraries to time: each one's stablegrad backend and the hand-written peer in it "
        "(default: those installed; hand NumPy, the baseline, always runs)",
    )
    parser.add_argument("--rounds", type=int, default=5, metavar="N", help="timing rounds (default 5)")


def parse_list(text: str, known: Sequence[str], what: str) -> list[str]:
    """`text` split at commas, each matched to `known` ignoring case; a UsageError names the first stranger.

    >>> parse_list("w1, W5", ["W1", "W3", "W5"], "workload")
    ['W1', 'W5']
    """
    chosen = []
    by_lower = {k.lower(): k for k in known}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item.lower() not in by_lower:
            raise UsageError(f"unknown {what} {item!r} (choose from {', '.join(known)})")
        chosen.append(by_lower[item.lower()])
    if not chosen:
        raise UsageError(f"no {what} given (choose from {', '.join(known)})")
    return list(dict.fromkeys(chosen))


def _libraries(text: str | None) -> list[str]:
    if text is None:
        return [lib for lib in LIBRARIES if installed(lib)]
    chosen = parse_list(text, LIBRARIES, "backend")
    for lib in chosen:
        if not installed(lib):
            raise UsageError(
                f"backend {lib!r} needs {NAMES[lib]}, which is not installed (pip install 'stablegrad[{lib}]')"
            )
    return chosen


def command(
    args: argparse.Namespace,
    systems: Sequence[System] = SYSTEMS,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the benchmark the parsed `args` ask for and print its report to `out`.

    Exit status: 0 when every system's results matched the reference, 1 when some system's
    were WRONG or it failed, 2 on a bad argument (one line on `err`).  `systems` replaces the
    table of systems (a test adds a deliberately wrong one).
    """
    out, err = out or sys.stdout, err or sys.stderr
    try:
        workloads = parse_list(args.workload, WORKLOADS, "workload")
        if args.size not in SIZES:
            raise UsageError(f"unknown size {args.size!r} (choose from {', '.join(SIZES)})")
        if args.rounds < 1:
            raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
        libraries = _libraries(args.backends)
    except UsageError as exc:
        print(f"stablegrad bench: error: {exc}", file=err)
        return EXIT_USAGE
    chosen = [s for s in systems if s.library in libraries or s.name == BASELINE]
    notes = [
        f"- {NAMES[lib]}: {'not installed' if not installed(lib) else 'not selected (--backends)'}; its columns are left out"
        for lib in LIBRARIES
        if lib not in libraries
    ]
    with single_threaded() as thread_notes:  # before Numba and JAX load: the run imports them
        todo = cases(workloads, args.size)
        progress = Bar(total=len(todo) * (len(chosen) + 1), stream=err)  # on a terminal only
        try:
            rows = run(todo, chosen, rounds=args.rounds, batch_seconds=BATCH_SECONDS, progress=progress)
        finally:
            progress.close()
        facts = machine_facts(thread_notes)
    print(markdown(rows, chosen, facts, args.rounds, notes, BATCH_SECONDS), file=out, end="")
    return EXIT_OK if all(r.status == "ok" for r in rows) else EXIT_WRONG


def main(argv: list[str] | None = None, systems: Sequence[System] = SYSTEMS) -> int:
    """`python -m stablegrad.bench [--workload W1,W3,W5] [--size small|default] [--backends ...] [--rounds N]`."""
    parser = argparse.ArgumentParser(prog="python -m stablegrad.bench", description=DESCRIPTION)
    add_arguments(parser)
    return command(parser.parse_args(argv), systems)


DESCRIPTION = (
    "Time value and gradient of three model families on stablegrad's backends and on the same "
    "formulas written by hand (NumPy, Numba, jax.jit), one thread each, and print a Markdown table."
)
