"""Compile time of a graph with many naive log(sum(exp(.))) terms, and how many rewrites fired.

    python benchmarks/recognition.py [--terms 1000]

Target (issue 4): 1,000 naive terms compile in under 2 s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import stablegrad as sg
from stablegrad.rewrite import Kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--terms", type=int, default=1000)
    args = parser.parse_args()
    x = sg.matrix("x")
    start = time.perf_counter()
    cost = None
    for i in range(args.terms):
        term = sg.sum(sg.log(sg.sum(sg.exp(x * (1.0 + i / args.terms)), axis=1)))
        cost = term if cost is None else cost + term
    built = time.perf_counter()
    f = sg.function([x], cost)
    compiled = time.perf_counter()
    g = sg.function([x], sg.grad(cost, x))
    with_grad = time.perf_counter()
    recognised = sum(c.kind is Kind.RECOGNITION for c in f.changes.changes)
    value = f(np.full((3, 4), 800.0))
    print(f"terms                        {args.terms}")
    print(f"build                        {built - start:8.3f} s")
    print(f"compile (value)              {compiled - built:8.3f} s   target < 2 s")
    print(f"grad + compile               {with_grad - compiled:8.3f} s")
    print(f"rewrites fired (value)       {len(f.changes)} ({recognised} recognitions)")
    print(f"nodes run (value / grad)     {len(f.nodes)} / {len(g.nodes)}")
    print(f"value at x = 800 finite      {bool(np.isfinite(value))}")


if __name__ == "__main__":
    main()
