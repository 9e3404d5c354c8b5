"""The `stablegrad` command line.  `stablegrad demo` runs the showcase from the README."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stablegrad", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="build, differentiate and run a small model, showing what stablegrad does")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo()
    return 2


if __name__ == "__main__":
    sys.exit(main())
