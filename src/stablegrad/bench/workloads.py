"""The three model families: their data, their stablegrad graphs, and the hand-written NumPy reference.

Each `Case` holds one workload at one shape and dtype.  `hand_numpy` is the formula and its
gradient written out by hand in NumPy; run on float64 copies of the inputs it is the
reference every system is checked against, and run on the case's own inputs it is the
baseline of the ratios.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import stablegrad as sg

WORKLOADS = ("W1", "W3", "W5")
SIZES = ("small", "default")

#: a compiled model: NumPy arrays in, a list of NumPy arrays out (value first, then the gradients)
Model = Callable[..., list]

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class Case:
    """One workload at one shape and dtype: its inputs and how to build each side of it."""

    workload: str  # "W1", "W3", "W5"
    name: str  # as the table shows it, e.g. "W1 1000x1000 f64"
    args: tuple[np.ndarray, ...]
    graph: Callable[[str], tuple[list, list]]  # dtype -> (sg inputs, [cost, *grads])
    hand_numpy: Model
    outputs: tuple[str, ...]  # what each output is, for messages: ("cost", "d/dx")
    extra: dict = field(default_factory=dict)  # e.g. K for the HMM

    @property
    def dtype(self) -> str:
        return str(self.args[0].dtype)

    @property
    def rtol(self) -> float:
        """How far an output may be from the float64 reference, relative to its largest entry.

        float64: the systems sum in different orders (pairwise, row by row, SIMD lanes),
        which over 10^6 terms costs a few ulps of the total, far below 1e-9.  float32 keeps
        about 7 digits; its sums over a thousand entries lose one or two more.
        """
        return 1e-9 if self.dtype == "float64" else 2e-4


def cases(workloads: list[str], size: str) -> list[Case]:
    """The cases of `workloads` (a subset of WORKLOADS) at `size` ("small" or "default"), in order."""
    small = size == "small"
    out: list[Case] = []
    for workload in workloads:
        if workload == "W1":
            rows, cols = (100, 100) if small else (1000, 1000)
            out += [logsumexp_case(rows, cols, dtype) for dtype in ("float64", "float32")]
        elif workload == "W3":
            out.append(hmm_case(50 if small else 1000, 8))
        elif workload == "W5":
            out.append(mixture_case(10**4 if small else 10**6, 5))
        else:
            raise ValueError(f"unknown workload {workload!r}")
    return out


def _short(dtype: str) -> str:
    return {"float64": "f64", "float32": "f32"}[dtype]


# -- W1: sum(w * logsumexp(x, axis=-1)), gradient wrt x ---------------------------------------------------
def logsumexp_case(rows: int, cols: int, dtype: str) -> Case:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((rows, cols)) * 5).astype(dtype)
    w = rng.uniform(0.5, 1.5, rows).astype(dtype)

    def graph(dtype: str):
        xs, ws = sg.matrix("x", dtype=dtype), sg.vector("w", dtype=dtype)
        cost = sg.sum(ws * sg.logsumexp(xs, axis=-1))
        return [xs, ws], [cost, sg.grad(cost, xs)]

    return Case("W1", f"W1 {rows}x{cols} {_short(dtype)}", (x, w), graph, logsumexp_numpy, ("cost", "d/dx"))


def logsumexp_numpy(x: np.ndarray, w: np.ndarray) -> list:
    """W1 by hand: one max, one exp, one sum per row; the gradient w * softmax(x) reuses the exp."""
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    cost = np.sum(w * (m[:, 0] + np.log(s[:, 0])))
    return [cost, e * (w[:, None] / s)]


# -- W3: the HMM forward algorithm, gradient wrt log A and log B --------------------------------------------
def hmm_case(steps: int, states: int) -> Case:
    rng = np.random.default_rng(3)
    log_a = np.log(rng.dirichlet(np.ones(states), states))  # rows: from-state
    log_b = rng.standard_normal((steps, states)) * 3

    def graph(dtype: str):
        a, b = sg.matrix("log_A", dtype=dtype), sg.matrix("log_B", dtype=dtype)

        def step(alpha, log_b_t):
            return sg.logsumexp(alpha[:, None] + a, axis=0) + log_b_t, None

        final, _ = sg.scan(step, b[0] - math.log(states), b[1:])  # a uniform start
        cost = sg.logsumexp(final)
        return [a, b], [cost, *sg.grad(cost, [a, b])]

    return Case(
        "W3", f"W3 T={steps} K={states} f64", (log_a, log_b), graph, hmm_numpy, ("cost", "d/dlog_A", "d/dlog_B")
    )


def hmm_numpy(log_a: np.ndarray, log_b: np.ndarray) -> list:
    """W3 by hand, in log space: the forward recursion storing every alpha, then its reverse.

    With p_t[i, j] = exp(alpha_{t-1}[i] + log A[i, j] - (alpha_t[j] - log B[t, j])) (the
    softmax weights of step t), the cotangent g_t of alpha_t gives d/dlog B[t] = g_t,
    d/dlog A += p_t * g_t[None, :] and g_{t-1} = p_t @ g_t.  The weights need no carry,
    so they are computed for all steps at once after the forward pass; only the
    matrix-vector products stay in the loop.
    """
    steps, states = log_b.shape
    alpha = np.empty_like(log_b)
    alpha[0] = log_b[0] - math.log(states)
    for t in range(1, steps):
        z = alpha[t - 1][:, None] + log_a
        m = np.max(z, axis=0)
        alpha[t] = m + np.log(np.sum(np.exp(z - m), axis=0)) + log_b[t]
    m = np.max(alpha[-1])
    e = np.exp(alpha[-1] - m)
    cost = m + np.log(np.sum(e))
    weights = np.exp(alpha[:-1, :, None] + log_a[None] - (alpha[1:] - log_b[1:])[:, None, :])  # (T-1, K, K)
    g_b = np.empty_like(log_b)
    g = e / np.sum(e)
    for t in range(steps - 1, 0, -1):
        g_b[t] = g
        g = weights[t - 1] @ g
    g_b[0] = g
    g_a = np.einsum("tij,tj->ij", weights, g_b[1:])
    return [cost, g_a, g_b]


# -- W5: a Gaussian-mixture log-likelihood, gradient wrt mu, log sigma and the weight logits --------------
def mixture_case(points: int, components: int) -> Case:
    rng = np.random.default_rng(5)
    mu = np.linspace(-4.0, 4.0, components)
    log_sigma = np.log(rng.uniform(0.5, 2.0, components))
    logits = rng.standard_normal(components)
    x = rng.normal(mu[rng.integers(0, components, points)], 1.0)

    def graph(dtype: str):
        xs = sg.vector("x", dtype=dtype)
        m, s, lg = (sg.vector(n, dtype=dtype) for n in ("mu", "log_sigma", "logits"))
        logw = sg.log_softmax(lg)
        z = (xs[:, None] - m[None, :]) * sg.exp(-s)[None, :]
        lp = logw - s - HALF_LOG_2PI - 0.5 * z * z
        cost = sg.sum(sg.logsumexp(lp, axis=1))
        return [xs, m, s, lg], [cost, *sg.grad(cost, [m, s, lg])]

    name = f"W5 N={_count(points)} K={components} f64"
    return Case(
        "W5", name, (x, mu, log_sigma, logits), graph, mixture_numpy, ("cost", "d/dmu", "d/dlog_sigma", "d/dlogits")
    )


def _count(n: int) -> str:
    exponent = round(math.log10(n))
    return f"10^{exponent}" if 10**exponent == n else str(n)


def mixture_numpy(x: np.ndarray, mu: np.ndarray, log_sigma: np.ndarray, logits: np.ndarray) -> list:
    """W5 by hand: the (N, K) log-densities, a row-wise logsumexp, and the gradients from its weights r.

    With r = softmax(lp, axis=1): d/dmu = sum_n r z / sigma, d/dlog sigma = sum_n r (z² - 1),
    d/dlogits = sum_n r - softmax(logits) * N.
    """
    shift = np.max(logits)
    w = np.exp(logits - shift)
    logw = logits - shift - np.log(np.sum(w))
    inv = np.exp(-log_sigma)
    z = (x[:, None] - mu) * inv
    lp = (logw - log_sigma - HALF_LOG_2PI) - 0.5 * z * z
    m = np.max(lp, axis=1, keepdims=True)
    e = np.exp(lp - m)
    s = np.sum(e, axis=1, keepdims=True)
    cost = np.sum(m) + np.sum(np.log(s))
    r = e / s
    rz = r * z
    counts = np.sum(r, axis=0)
    g_mu = np.sum(rz, axis=0) * inv
    g_log_sigma = np.sum(rz * z, axis=0) - counts
    g_logits = counts - np.exp(logw) * np.sum(counts)
    return [cost, g_mu, g_log_sigma, g_logits]
