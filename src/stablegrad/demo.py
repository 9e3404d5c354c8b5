"""The showcase behind `stablegrad demo`."""

from __future__ import annotations

import time

import numpy as np

import stablegrad as sg


def run_demo() -> int:
    print("stablegrad demo: build a graph, differentiate it, compile it, run it\n")
    x = sg.tensor("x", shape=(None, 5))
    w = sg.tensor("w", shape=(5,))
    y = sg.sum(sg.exp(x) * w, axis=1) / x.shape[1]
    cost = sg.mean(y**2)
    start = time.perf_counter()
    gx, gw = sg.grad(cost, wrt=[x, w])
    f = sg.function([x, w], [cost, gx, gw])
    elapsed = time.perf_counter() - start
    print(
        f"  cost = mean((sum(exp(x) * w, axis=1) / 5) ** 2): grad + compile in {elapsed * 1e3:.1f} ms, {len(f.nodes)} nodes"
    )
    rng = np.random.default_rng(0)
    cost_v, _, gw_v = f(rng.random((3, 5)), np.ones(5))
    print(f"  cost = {float(cost_v):.6f}")
    print(f"  d cost / d w = {np.array2string(gw_v, precision=4)}")
    return 0
