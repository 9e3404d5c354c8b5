"""How build, `grad` and compile grow with graph size: an HMM forward recursion unrolled over T steps.

    python benchmarks/scaling.py                 # T = 250 … 4000, fitted exponents
    python benchmarks/scaling.py --steps 500,1000,2000,4000,8000
    python benchmarks/scaling.py --in-order      # the steps in order: rolled into one loop

Each step indexes one row of the (T, K) emission matrix and takes a logsumexp over the
states (about ten nodes a step, value and gradient), so T steps are a graph of ~10·T nodes
plus its gradient.  The rows are read in a shuffled order, so that the steps are not one
loop's (`rewrite/reroll.py` rolls a loop written out in order into a `scan`, whose graph
does not grow with T): what is measured is the pipeline on a graph of that size.  Time is wall-clock seconds of one fresh build each; memory is the peak
Python allocation (tracemalloc) of `grad` and of compiling, on top of what was held before.
The exponent is the slope of log(cost) against log(T), fitted over the sizes run: 1 is
linear.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np

import stablegrad as sg

K = 8


def unrolled_hmm(steps: int, in_order: bool = False):
    log_a, log_b, log_pi = sg.matrix("log_A"), sg.matrix("log_B"), sg.vector("log_pi")
    rows = np.arange(steps) if in_order else np.random.default_rng(0).permutation(steps)
    alpha = log_pi + log_b[int(rows[0])]
    for t in rows[1:]:
        alpha = sg.logsumexp(alpha[:, None] + log_a, axis=0) + log_b[int(t)]
    return [log_a, log_b, log_pi], sg.logsumexp(alpha)


def measure(steps: int, in_order: bool = False) -> dict[str, float]:
    """Times from one run, memory from another (tracemalloc slows Python down twofold and more)."""
    gc.collect()
    started = time.perf_counter()
    inputs, cost = unrolled_hmm(steps, in_order)
    built = time.perf_counter()
    grads = sg.grad(cost, inputs[:2])
    differentiated = time.perf_counter()
    f = sg.function(inputs, [cost, *grads])
    compiled = time.perf_counter()
    nodes = len(f.nodes)
    rng = np.random.default_rng(0)
    args = [np.log(rng.dirichlet(np.ones(K), K)), rng.standard_normal((steps, K)), np.full(K, -np.log(K))]
    assert all(np.isfinite(v).all() for v in f(*args))
    del f, grads
    gc.collect()
    inputs, cost = unrolled_hmm(steps, in_order)
    tracemalloc.start()
    grads = sg.grad(cost, inputs[:2])
    grad_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    sg.function(inputs, [cost, *grads])
    compile_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "nodes": float(nodes),
        "build s": built - started,
        "grad s": differentiated - built,
        "compile s": compiled - differentiated,
        "grad MB": grad_peak / 1e6,
        "compile MB": compile_peak / 1e6,
    }


def slope(xs, ys) -> float:
    return float(np.polyfit(np.log(xs), np.log(np.maximum(ys, 1e-9)), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="250,500,1000,2000,4000", help="comma-separated T values")
    parser.add_argument("--in-order", action="store_true", help="read the rows in order (the steps roll up)")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    rows = []
    for t in steps:
        rows.append(measure(t, args.in_order))
        print(
            f"T={t:6d}  "
            + "  ".join(f"{k} {v:7.3f}" if k.endswith(" s") else f"{k} {v:6.0f}" for k, v in rows[-1].items())
        )
    print("fitted exponents (1 = linear in T):")
    for key in rows[0]:
        if key != "nodes":
            print(f"  {key:10s} {slope(steps, [r[key] for r in rows]):.2f}")


if __name__ == "__main__":
    main()
