"""The `stablegrad` command line.

    stablegrad demo                                   the showcase from the README
    stablegrad audit model.py:loss --input x=float64[3,5] --input w=float64[5] [--html map.html]
    stablegrad bench --size small --workload W1,W3    time the backends against hand-written code

`audit` prints the stability report and exits 0 when the model is stable, 1 when
it is not (so it can guard a CI job), and 2 on bad input (an unknown module or
function, inputs that do not match its parameters, an unsupported dtype), with a
one-line message; `--debug` shows the traceback instead.  `--html PATH` also writes the
stability map (`AuditReport.to_html`): a heat map per output and gradient, the formulas as
written next to them as recognised; `--svg PATH` writes the map alone.

`bench` times value and gradient of three models on each installed backend and on the
same formulas written by hand (NumPy, Numba, `jax.jit`), one thread each, and prints a
Markdown table (see `stablegrad.bench`); it exits 1 when a system's results are wrong
and 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._version import __version__
from .audit import audit
from .audit.loader import load_function, parse_input
from .audit.model import AuditError, check_dtypes
from .bench.commandline import DESCRIPTION as BENCH_DESCRIPTION
from .bench.commandline import add_arguments as add_bench_arguments
from .bench.commandline import command as bench
from .demo import run_demo
from .errors import StableGradError
from .graph.types import is_floating
from .progress import Bar

EXIT_STABLE, EXIT_UNSTABLE, EXIT_USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="stablegrad", description="Symbolic tensor graphs with autodiff, stable by construction."
    )
    parser.add_argument("--version", action="version", version=f"stablegrad {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="audit a naive model with and without recognition, and explain the fix")
    demo.add_argument("--fast", action="store_true", help="float64 only (quicker)")
    audit_command = commands.add_parser(
        "audit",
        help="sweep a model over hard inputs against a high-precision reference",
        description="Sweep every float input over hard scenarios, compare value and gradient with an mpmath "
        "reference, and name the source line of each failure. Exit 0: stable, 1: unstable, 2: bad input.",
    )
    audit_command.add_argument(
        "model", help="path/to/model.py:function (or package.module:function) that builds the graph"
    )
    audit_command.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=DTYPE[SHAPE]",
        help="one per parameter of the function, e.g. x=float64[3,5] (a scalar: x=float64)",
    )
    audit_command.add_argument(
        "--dtypes",
        default=None,
        help="float dtypes to audit, comma-separated (default: the float dtypes of the inputs)",
    )
    audit_command.add_argument(
        "--no-recognition",
        action="store_true",
        help="audit the formulas exactly as written (no recognition rewrites), as sg.function(..., recognition=False)",
    )
    audit_command.add_argument("--json", action="store_true", help="print the report as JSON")
    audit_command.add_argument(
        "--html",
        metavar="PATH",
        help="also write the stability map, as written vs as recognised, as one self-contained page",
    )
    audit_command.add_argument("--svg", metavar="PATH", help="also write the stability map alone, as SVG")
    audit_command.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    audit_command.add_argument("--debug", action="store_true", help="show tracebacks")
    bench_command = commands.add_parser(
        "bench",
        help="time value+gradient of three models on each backend against hand-written NumPy, Numba, jax.jit",
        description=BENCH_DESCRIPTION + " Exit 0: all results right, 1: some system's wrong, 2: bad input.",
    )
    add_bench_arguments(bench_command)
    args = parser.parse_args(argv)
    if args.command == "bench":
        return bench(args)
    if args.command == "demo":
        try:
            return run_demo(fast=args.fast)
        except StableGradError as exc:  # mpmath missing, most likely
            print(f"stablegrad demo: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return _audit(args)


def _audit(args) -> int:
    try:
        report = _run_audit(args)
    except StableGradError as exc:
        if args.debug:
            raise
        print(f"stablegrad audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug of ours or of the model: one line unless --debug
        if args.debug:
            raise
        print(
            f"stablegrad audit: error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(report.to_json() if args.json else report)
    try:
        if args.html:
            report.to_html(args.html)
        if args.svg:
            Path(args.svg).write_text(report.to_svg(), encoding="utf-8")
    except OSError as exc:
        print(f"stablegrad audit: error: cannot write the map: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_STABLE if report.ok else EXIT_UNSTABLE


def _run_audit(args):
    inputs = {}
    for text in args.input:
        name, spec = parse_input(text)
        if name in inputs:
            raise AuditError(f"--input {name} is given twice")
        inputs[name] = spec
    if args.dtypes is not None:
        dtypes = check_dtypes([d.strip() for d in args.dtypes.split(",") if d.strip()])
    else:
        floats = list(dict.fromkeys(t.dtype.name for t in inputs.values() if is_floating(t.dtype)))
        if not floats:
            raise AuditError("no float input to sweep: give at least one --input NAME=float64[...]")
        dtypes = check_dtypes(floats)
    fn = load_function(args.model)
    progress = None if args.no_progress else _progress_bar(sys.stderr)
    return audit(fn, inputs, dtypes, recognition=not args.no_recognition, progress=progress)


def _progress_bar(stream):
    """The audit's `progress(done, total, label)` drawn as a bar (its reruns start it afresh)."""
    bar = Bar(total=1, stream=stream, delay=0.5)

    def show(done: int, total: int, label: str) -> None:
        if done == 0:
            bar.started, bar.total = time.perf_counter(), total
        if done >= total:
            bar.close()
        else:
            bar.show(done, label)

    return show


if __name__ == "__main__":
    sys.exit(main())
