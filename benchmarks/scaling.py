"""How build, `grad` and compile grow with graph size: an HMM forward recursion unrolled over T steps.

    python benchmarks/scaling.py                 # T = 250 … 4000, fitted exponents
    python benchmarks/scaling.py --steps 500,1000,2000,4000,8000

Each step indexes one row of the (T, K) emission matrix and takes a logsumexp over the
states (about ten nodes a step, value and gradient), so T steps are a graph of ~10·T nodes
plus its gradient.  Time is wall-clock seconds of one fresh build each; memory is the peak
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


def unrolled_hmm(steps: int):
    log_a, log_b, log_pi = sg.matrix("log_A"), sg.matrix("log_B"), sg.vector("log_pi")
    alpha = log_pi + log_b[0]
    for t in range(1, steps):
        alpha = sg.logsumexp(alpha[:, None] + log_a, axis=0) + log_b[t]
    return [log_a, log_b, log_pi], sg.logsumexp(alpha)


def measure(steps: int) -> dict[str, float]:
    """Times from one run, memory from another (tracemalloc slows Python down twofold and more)."""
    gc.collect()
    started = time.perf_counter()
    inputs, cost = unrolled_hmm(steps)
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
    inputs, cost = unrolled_hmm(steps)
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
    steps = [int(s) for s in parser.parse_args().steps.split(",")]
    rows = []
    for t in steps:
        rows.append(measure(t))
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
