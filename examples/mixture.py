"""A Gaussian mixture whose weights may be exactly zero: finite value and gradient regardless.

    log p(x_n) = log Σ_k w_k N(x_n | μ_k, σ_k²)

Two things go wrong with the formula as written.  Far from every component the
densities underflow (`exp(-800)` is 0) and the log is -inf, with a NaN gradient.  And
a component switched off with `w_k = 0` turns `log w_k` into -inf, which in the naive
gradient meets `inf - inf` or `0 * inf`.

`sg.logsumexp(log_density, b=weights)` handles both: the sum is max-shifted, and a
zero weight removes its term — including from the gradient, where the weight's own
derivative `exp(log_density - out)` stays finite.  The same holds for the other
spelling, with log-weights as the parameters, `logsumexp(log_weights + log_density)`:
an entry of -inf is as if absent, and its gradient is exactly 0.

Run:  python examples/mixture.py
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp as scipy_logsumexp

import stablegrad as sg


def build(dtype: str = "float64") -> tuple[list, sg.Function, sg.Function]:
    """Mean log-likelihood and its gradient, once with `b=weights` and once with `log_weights + ...`.

    Each function maps (x, weights or log-weights, means, log_scales) to the value and
    the gradients w.r.t. the last three.
    """
    x = sg.tensor("x", shape=(None,), dtype=dtype)
    weights = sg.tensor("weights", shape=(None,), dtype=dtype)
    log_weights = sg.tensor("log_weights", shape=(None,), dtype=dtype)
    means = sg.tensor("means", shape=(None,), dtype=dtype)
    log_scales = sg.tensor("log_scales", shape=(None,), dtype=dtype)
    z = (x[:, None] - means[None, :]) * sg.exp(-log_scales)[None, :]
    log_density = -0.5 * z * z - log_scales[None, :] - 0.5 * float(np.log(2 * np.pi))  # (N, K)
    by_weight = sg.mean(sg.logsumexp(log_density, axis=1, b=weights[None, :]))
    by_log_weight = sg.mean(sg.logsumexp(log_weights[None, :] + log_density, axis=1))
    functions = []
    for loglik, w in ((by_weight, weights), (by_log_weight, log_weights)):
        grads = sg.grad(loglik, [w, means, log_scales])
        functions.append(sg.function([x, w, means, log_scales], [loglik, *grads]))
    return [x, weights, log_weights, means, log_scales], functions[0], functions[1]


def reference(x, weights, means, log_scales) -> float:
    """The mean log-likelihood with SciPy (weights as `b`)."""
    scales = np.exp(log_scales)
    log_density = -0.5 * ((x[:, None] - means) / scales) ** 2 - log_scales - 0.5 * np.log(2 * np.pi)
    return float(np.mean(scipy_logsumexp(log_density, axis=1, b=weights)))


def naive(x, weights, means, log_scales) -> float:
    """The formula as written, in NumPy: log of a sum of weighted densities."""
    scales = np.exp(log_scales)
    density = np.exp(-0.5 * ((x[:, None] - means) / scales) ** 2) / (scales * np.sqrt(2 * np.pi))
    with np.errstate(divide="ignore"):
        return float(np.mean(np.log(density @ weights)))


def main(n: int = 400, iterations: int = 60, learning_rate: float = 0.05, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    data = np.concatenate([rng.normal(-3.0, 0.5, n // 2), rng.normal(2.0, 1.0, n - n // 2), [45.0]])  # one far outlier
    weights = np.array([0.5, 0.5, 0.0])  # the third component is switched off
    means = np.array([-1.0, 1.0, 100.0])
    log_scales = np.zeros(3)
    _, by_weight, by_log_weight = build()
    print(f"mixture of 3 Gaussians, weights {weights} (one exactly zero), {len(data)} points incl. an outlier at 45")
    print(f"naive NumPy log-likelihood: {naive(data, weights, means, log_scales)} (the outlier's density underflows)")
    results = {}
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights)  # -inf for the switched-off component
    for name, f, w in (("b=weights", by_weight, weights), ("log_weights + ...", by_log_weight, log_weights)):
        value, g_w, g_mu, g_s = f(data, w, means, log_scales)
        expected = reference(data, weights, means, log_scales)
        finite = all(np.all(np.isfinite(v)) for v in (value, g_w, g_mu, g_s))
        print(f"{name:>20}: log-likelihood {value:.10f} (SciPy {expected:.10f}), gradients finite: {finite}")
        print(
            f"{'':>20}  d/d{'weights' if w is weights else 'log_weights'} {np.round(g_w, 4)}  d/dmeans {np.round(g_mu, 4)}"
        )
        if not finite or abs(value - expected) > 1e-12 * abs(expected):
            raise AssertionError(f"{name}: value {value} vs SciPy {expected}, or a non-finite gradient")
        results[name] = (float(value), g_w, g_mu, g_s)
    # a few steps of gradient ascent on the means and scales; the zero weight stays zero and harmless
    for i in range(1, iterations + 1):
        value, _, g_mu, g_s = by_weight(data, weights, means, log_scales)
        means = means + learning_rate * 10 * g_mu
        log_scales = log_scales + learning_rate * g_s
        if i % 20 == 0:
            print(f"iter {i:3d}  mean log-likelihood {value:.6f}  means {np.round(means[:2], 3)}")
    results["fitted_means"] = means
    results["final"] = float(by_weight(data, weights, means, log_scales)[0])
    return results


if __name__ == "__main__":
    main()
