"""Core speed benchmarks: executor throughput, per-node overhead, build + compile time.

    python benchmarks/core.py            # the full sizes the targets are stated for
    python benchmarks/core.py --quick    # smaller sizes, a few seconds

(a) value + gradient of a long elementwise chain on a large array, against the same
    computation written by hand in NumPy (forward storing what the backward needs,
    then the backward), run alternately so both see the same machine state;
(b) per-node overhead: a compiled function of N nodes on tiny arrays, time / N;
(c) build + compile time of a large graph, without and with its gradient.

Timings are the minimum over repeats (the least disturbed run); machine noise
only ever adds time.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import numpy as np

import stablegrad as sg

SCALE, SHIFT = 1.0001, 0.5
#: the chain repeats these four one-node steps: x * SCALE, x + SHIFT, tanh(x), sin(x)
CYCLE = ("scale", "shift", "tanh", "sin")


def chain_graph(x: sg.Variable, length: int) -> sg.Variable:
    """`length` elementwise nodes, cycling through CYCLE."""
    for i in range(length):
        step = CYCLE[i % len(CYCLE)]
        if step == "scale":
            x = x * SCALE
        elif step == "shift":
            x = x + SHIFT
        elif step == "tanh":
            x = sg.tanh(x)
        else:
            x = sg.sin(x)
    return x


def chain_numpy(x: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """sum(chain(x)) and its gradient, as one would write them by hand.

    The forward pass keeps exactly what the backward pass needs (tanh's operand and
    output, sin's operand) and nothing else; the backward pass is the chain rule with
    the same derivative formulas stablegrad uses, so both do the same arithmetic:
    tanh' is 1 - tanh² near 0 and sech² = 4e / (1 + e)², e = exp(-2|x|), beyond
    |x| = 1/2 (where 1 - tanh² loses its digits).  No in-place tricks: the graph's
    executor does not use them either.
    """
    saved: list[np.ndarray] = []
    for i in range(length):
        step = CYCLE[i % len(CYCLE)]
        if step == "scale":
            x = x * SCALE
        elif step == "shift":
            x = x + SHIFT
        elif step == "tanh":
            saved.append(x)
            x = np.tanh(x)
            saved.append(x)
        else:
            saved.append(x)
            x = np.sin(x)
    cost = np.sum(x)
    g = np.ones_like(x)
    for i in reversed(range(length)):
        step = CYCLE[i % len(CYCLE)]
        if step == "scale":
            g = g * SCALE
        elif step == "tanh":
            out, operand = saved.pop(), saved.pop()
            size = np.abs(operand)
            e = np.exp(-2 * size)
            g = g * np.where(size < 0.5, 1 - np.square(out), 4 * e / np.square(1 + e))
        elif step == "sin":
            g = g * np.cos(saved.pop())
    return cost, g


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_chain(length: int, shape: tuple[int, int], repeats: int) -> dict:
    x = sg.tensor("x", shape)
    cost = sg.sum(chain_graph(x, length))
    f = sg.function([x], [cost, sg.grad(cost, x)])
    data = np.random.default_rng(0).uniform(-1.0, 1.0, shape)

    ours_value, ours_grad = f(data)
    ref_value, ref_grad = chain_numpy(data, length)
    np.testing.assert_allclose(ours_value, ref_value, rtol=1e-9)
    np.testing.assert_allclose(ours_grad, ref_grad, rtol=1e-9, atol=1e-12)

    ours, numpy_ = float("inf"), float("inf")
    for _ in range(repeats):  # alternate, so that both see the same machine state
        ours = min(ours, best_time(lambda: f(data), 1))
        numpy_ = min(numpy_, best_time(lambda: chain_numpy(data, length), 1))
    return {
        "what": f"(a) value+grad, {length}-op chain on {shape} float64",
        "ours": ours,
        "numpy": numpy_,
        "result": f"ratio {ours / numpy_:.2f}x",
        "target": "<= 1.3x",
        "ok": ours / numpy_ <= 1.3,
    }


def bench_overhead(length: int, repeats: int) -> dict:
    x = sg.tensor("x", (4,))
    f = sg.function([x], chain_graph(x, length))
    data = np.linspace(-1.0, 1.0, 4)
    f(data)
    per_node = best_time(lambda: f(data), repeats) / len(f.nodes)
    return {
        "what": f"(b) per-node time, {len(f.nodes)} nodes on float64[4]",
        "ours": per_node,
        "numpy": None,
        "result": f"{per_node * 1e6:.2f} µs/node",
        "target": "< 10 µs",
        "ok": per_node < 10e-6,
    }


def bench_build(length: int, with_grad: bool, repeats: int) -> dict:
    def build_and_compile():
        x = sg.tensor("x", (None, 8))
        cost = sg.sum(chain_graph(x, length))
        outputs = [cost, sg.grad(cost, x)] if with_grad else [cost]
        return sg.function([x], outputs)

    seconds = best_time(build_and_compile, repeats)
    nodes = len(build_and_compile().nodes)
    return {
        "what": f"(c) build+compile {length}-node graph{' + grad' if with_grad else ''} ({nodes} nodes run)",
        "ours": seconds,
        "numpy": None,
        "result": f"{seconds:.3f} s",
        "target": "< 1 s",
        "ok": seconds < 1.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        rows = [
            bench_chain(200, (300, 300), repeats=3),
            bench_overhead(1000, repeats=5),
            bench_build(2000, False, repeats=2),
            bench_build(2000, True, repeats=2),
        ]
    else:
        rows = [
            bench_chain(1000, (1000, 1000), repeats=3),
            bench_overhead(10_000, repeats=5),
            bench_build(10_000, False, repeats=3),
            bench_build(10_000, True, repeats=3),
        ]
    print(f"{'benchmark':<62} {'ours':>10} {'numpy':>10}  {'result':<16} {'target':<8} ok")
    for row in rows:
        numpy_ = f"{row['numpy']:.4f}s" if row["numpy"] is not None else "-"
        print(
            f"{row['what']:<62} {row['ours']:>9.4g}s {numpy_:>10}  {row['result']:<16} {row['target']:<8} "
            f"{'yes' if row['ok'] else 'NO'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
