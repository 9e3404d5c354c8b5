"""Benchmarks of `scan` on the NumPy backend (not a test; numbers go in the closing notes).

    python benchmarks/scan.py

1. HMM value + gradient, K=8, T=1000: the forward algorithm in `scan` with `grad`,
   against a hand-written NumPy forward–backward (target: within 3x).
2. Build + compile time of that model: tracing the step, `grad`, `function` (target < 0.3 s).
3. Per-step overhead on tiny states: a scalar recurrence `c * a + x`, the time per step
   of the whole loop minus the time of running its two-op body (target < 30 µs).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import stablegrad as sg
from stablegrad.ops.scan import Scan


def best_of(fn: Callable[[], object], repeat: int = 7, number: int = 1) -> float:
    """The fastest of `repeat` timings of `number` calls, per call (seconds)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def hmm_graph(K: int):
    L, mu, y = sg.matrix("trans_logits"), sg.vector("means"), sg.vector("y")  # shapes known only at run time
    log_A = sg.log_softmax(L, axis=1)
    z = y[:, None] - mu[None, :]
    log_b = -0.5 * z * z - 0.5 * float(np.log(2 * np.pi))

    def step(log_alpha, log_b_t):
        new = sg.logsumexp(log_alpha[:, None] + log_A, axis=0) + log_b_t
        return new, None

    final, _ = sg.scan(step, log_b[0] - float(np.log(K)), log_b[1:])
    loglik = sg.logsumexp(final)
    return [L, mu, y], [loglik, *sg.grad(loglik, [L, mu])]


def numpy_forward_backward(L: np.ndarray, mu: np.ndarray, y: np.ndarray):
    """Value and gradient (logits, means) of the same model: scaled forward–backward, by hand."""
    K, T = len(mu), len(y)
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    z = y[:, None] - mu
    log_b = -0.5 * z * z - 0.5 * np.log(2 * np.pi)
    shift = log_b.max(axis=1, keepdims=True)
    b = np.exp(log_b - shift)
    alpha, c = np.empty((T, K)), np.empty(T)
    a = b[0] / K
    c[0] = a.sum()
    alpha[0] = a / c[0]
    for t in range(1, T):
        a = (alpha[t - 1] @ A) * b[t]
        c[t] = a.sum()
        alpha[t] = a / c[t]
    beta = np.empty((T, K))
    beta[-1] = 1.0
    for t in range(T - 2, -1, -1):
        beta[t] = A @ (b[t + 1] * beta[t + 1]) / c[t + 1]
    pairs = A * (alpha[:-1].T @ (b[1:] * beta[1:] / c[1:, None]))
    g_L = pairs - A * pairs.sum(axis=1, keepdims=True)
    g_mu = (alpha * beta * z).sum(axis=0)
    return np.log(c).sum() + shift.sum(), g_L, g_mu


def bench_hmm(K: int = 8, T: int = 1000) -> None:
    rng = np.random.default_rng(0)
    L, mu, y = rng.standard_normal((K, K)), rng.standard_normal(K), 2 * rng.standard_normal(T)
    start = time.perf_counter()
    inputs, outputs = hmm_graph(K)
    built = time.perf_counter()
    f = sg.function(inputs, outputs)
    for node in f.nodes:  # the step bodies compile on first use; count them here
        if isinstance(node.op, Scan):
            node.op.inner.program()
    compiled = time.perf_counter()
    ours = f(L, mu, y)
    first_call = time.perf_counter()
    reference = numpy_forward_backward(L, mu, y)
    for a, b in zip(ours, reference):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    t_ours = best_of(lambda: f(L, mu, y))
    t_numpy = best_of(lambda: numpy_forward_backward(L, mu, y))
    print(
        f"HMM value+gradient K={K} T={T}: stablegrad {t_ours * 1e3:.1f} ms, NumPy forward-backward {t_numpy * 1e3:.1f} ms, ratio {t_ours / t_numpy:.1f}x (target <= 3x)"
    )
    print(
        f"  build {built - start:.3f} s + compile {compiled - built:.3f} s = {compiled - start:.3f} s (target < 0.3 s); first call {first_call - compiled:.3f} s"
    )
    for node in f.nodes:
        if isinstance(node.op, Scan):
            shapes, plan = next((s, p) for s, p in node.op.inner._hoisted.items())
            ahead = f", {len(plan.prologue.nodes)} run once ahead, batched" if plan else ""
            step = plan.step if plan else node.op.inner.program(shapes)
            print(f"  {'backward' if node.op.reverse else 'forward'} scan: {len(step.nodes)} ops a step{ahead}")


def bench_overhead(T: int = 20000) -> None:
    xs, a = sg.vector("xs"), sg.scalar("a")
    final, ys = sg.scan(lambda c, x: (c * a + x, c), sg.constant(0.0), xs)
    f = sg.function([xs, a], [final, ys])
    g = sg.function([xs, a], sg.grad(final + sg.sum(ys), [xs, a]))
    X = np.ones(T)
    (node,) = [n for n in f.nodes if isinstance(n.op, Scan)]
    body = node.op.inner.program()
    args = [np.float64(0.5), np.float64(1.0), np.asarray(0.9)]
    with np.errstate(all="ignore"):
        t_body = best_of(lambda: body.run_unguarded(args), number=2000)
    t_forward = best_of(lambda: f(X, 0.9), repeat=5) / T
    t_grad = best_of(lambda: g(X, 0.9), repeat=5) / T
    print(
        f"per step, scalar carry c*a + x (T={T}): loop {t_forward * 1e6:.2f} µs, of which the 2-op body {t_body * 1e6:.2f} µs: overhead {(t_forward - t_body) * 1e6:.2f} µs (target < 30 µs)"
    )
    print(f"  value+gradient (forward + reverse scan): {t_grad * 1e6:.2f} µs a step")


if __name__ == "__main__":
    bench_overhead()
    bench_hmm()
