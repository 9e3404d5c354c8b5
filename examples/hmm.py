"""A hidden Markov model with Gaussian emissions, fitted by gradient ascent on its log-likelihood.

The log-likelihood is the forward algorithm written the way it reads on paper, in
log space, as a `scan`:

    log α_0 = log π + log b_0
    log α_t = logsumexp_i(log α_{t-1}[i] + log A[i, :]) + log b_t
    log p(y) = logsumexp(log α_{T-1})

Written with probabilities instead, the forward message is a product of T densities
and leaves the float range within a hundred steps (density 8 nats a step: past
exp(709) at t ≈ 90), and so does its gradient.  In log space with `logsumexp`, value
and gradient stay finite for any T; the gradient is a reverse scan over the stored
messages, i.e. the backward pass of forward–backward, derived automatically.

The fit adjusts the transition logits and the emission means with a small Adam loop
(written out below), printing progress every few iterations, and at the end checks
the log-likelihood against an independent scaled forward recursion in plain NumPy.

Run:  python examples/hmm.py
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import stablegrad as sg


@dataclass
class HMM:
    """The compiled model: `value_and_grad(trans_logits, means, y) -> (loglik, d/dlogits, d/dmeans)`."""

    n_states: int
    sigma: float
    value_and_grad: sg.Function
    loglik: sg.Function


def build(n_states: int, sigma: float, dtype: str = "float64") -> HMM:
    """The forward algorithm for K states with Gaussian emissions N(means[k], sigma²), uniform start."""
    trans_logits = sg.tensor("trans_logits", shape=(n_states, n_states), dtype=dtype)
    means = sg.tensor("means", shape=(n_states,), dtype=dtype)
    y = sg.tensor("y", shape=(None,), dtype=dtype)
    log_A = sg.log_softmax(trans_logits, axis=1)  # rows: from-state; each row sums to one
    z = (y[:, None] - means[None, :]) / sigma
    log_b = -0.5 * z * z - float(np.log(sigma * np.sqrt(2 * np.pi)))  # (T, K) emission log-densities

    def step(log_alpha, log_b_t):
        new = sg.logsumexp(log_alpha[:, None] + log_A, axis=0) + log_b_t
        return new, None

    final, _ = sg.scan(step, log_b[0] - float(np.log(n_states)), log_b[1:])
    return _compiled(n_states, sigma, [trans_logits, means, y], sg.logsumexp(final))


def build_named(n_states: int, sigma: float, dtype: str = "float64") -> HMM:
    """The same model with named dims: the observations over "time", the states over "state"
    (a transition's previous state over "from"); no axis number anywhere."""
    trans_logits = sg.tensor("trans_logits", shape=(n_states, n_states), dtype=dtype, dims=("from", "state"))
    means = sg.tensor("means", shape=(n_states,), dtype=dtype, dims=("state",))
    y = sg.tensor("y", shape=(None,), dtype=dtype, dims=("time",))
    log_A = sg.log_softmax(trans_logits, dim="state")
    z = (y - means) / sigma  # dims ("time", "state"), aligned by name
    log_b = -0.5 * z * z - float(np.log(sigma * np.sqrt(2 * np.pi)))

    def step(log_alpha, log_b_t):  # the carry's "state" is the next step's "from"
        new = sg.logsumexp(log_alpha.rename({"state": "from"}) + log_A, dim="from") + log_b_t
        return new, None

    first = log_b.isel(time=0) - float(np.log(n_states))
    final, _ = sg.scan(step, first, log_b.isel(time=slice(1, None)), dim="time")
    return _compiled(n_states, sigma, [trans_logits, means, y], sg.logsumexp(final, dim="state"))


def _compiled(n_states: int, sigma: float, inputs: list[sg.Variable], loglik: sg.Variable) -> HMM:
    grads = sg.grad(loglik, inputs[:2])
    return HMM(n_states, sigma, sg.function(inputs, [loglik, *grads]), sg.function(inputs, loglik))


def sample(rng: np.random.Generator, A: np.ndarray, means: np.ndarray, sigma: float, T: int) -> np.ndarray:
    """T observations of the HMM (uniform start)."""
    K = len(means)
    states = np.empty(T, dtype=np.int64)
    states[0] = rng.integers(K)
    for t in range(1, T):
        states[t] = rng.choice(K, p=A[states[t - 1]])
    return means[states] + sigma * rng.standard_normal(T)


def scaled_forward_loglik(trans_logits: np.ndarray, means: np.ndarray, sigma: float, y: np.ndarray) -> float:
    """log p(y) by the textbook scaled forward recursion, in probabilities (an independent check)."""
    A = np.exp(trans_logits - trans_logits.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    log_b = -0.5 * ((y[:, None] - means[None, :]) / sigma) ** 2 - np.log(sigma * np.sqrt(2 * np.pi))
    shift = log_b.max(axis=1)  # b_t = exp(log_b_t - shift_t) is in (0, 1]
    b = np.exp(log_b - shift[:, None])
    alpha = b[0] / len(means)
    total = np.log(alpha.sum()) + shift[0]
    alpha /= alpha.sum()
    for t in range(1, len(y)):
        alpha = (alpha @ A) * b[t]
        scale = alpha.sum()
        total += np.log(scale) + shift[t]
        alpha /= scale
    return float(total)


def fit(
    model: HMM,
    y: np.ndarray,
    trans_logits: np.ndarray,
    means: np.ndarray,
    iterations: int = 200,
    learning_rate: float = 0.1,
    print_every: int = 20,
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Gradient ascent on the log-likelihood with Adam; returns the fitted parameters and the trace."""
    params = [trans_logits.copy(), means.copy()]
    first = [np.zeros_like(p) for p in params]
    second = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    trace = []
    for i in range(1, iterations + 1):
        loglik, *grads = model.value_and_grad(*params, y)
        if not np.isfinite(loglik) or not all(np.all(np.isfinite(g)) for g in grads):
            raise FloatingPointError(f"iteration {i}: log-likelihood {loglik} or its gradient is not finite")
        trace.append(float(loglik))
        for p, g, m, v in zip(params, grads, first, second):
            m += (1 - beta1) * (g - m)
            v += (1 - beta2) * (g * g - v)
            p += learning_rate * (m / (1 - beta1**i)) / (np.sqrt(v / (1 - beta2**i)) + eps)  # ascent
        if print_every and (i % print_every == 0 or i == 1):
            print(f"iter {i:4d}   log-likelihood {loglik:12.4f}   per step {loglik / len(y):8.4f}")
    return params[0], params[1], trace


def main(n_states: int = 3, T: int = 1000, iterations: int = 100, print_every: int = 10, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sigma = 0.5
    true_A = np.full((n_states, n_states), 0.1 / max(n_states - 1, 1)) + np.eye(n_states) * (
        0.9 - 0.1 / max(n_states - 1, 1)
    )
    true_means = np.linspace(-2.0, 2.0, n_states)
    y = sample(rng, true_A, true_means, sigma, T)
    model = build(n_states, sigma)
    start_logits = np.zeros((n_states, n_states))
    start_means = np.sort(rng.choice(y, n_states, replace=False))  # a data-driven start, ordered like the truth
    print(f"HMM: K={n_states}, T={T}, sigma={sigma}; fitting transition logits and emission means")
    logits, means, trace = fit(model, y, start_logits, start_means, iterations, print_every=print_every)
    loglik = float(model.loglik(logits, means, y))
    reference = scaled_forward_loglik(logits, means, sigma, y)
    relative = abs(loglik - reference) / abs(reference)
    A = np.exp(logits - logits.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    print(f"fitted means {np.round(means, 3)} (true {np.round(true_means, 3)})")
    print(f"fitted transition diagonal {np.round(np.diag(A), 3)} (true {np.round(np.diag(true_A), 3)})")
    print(
        f"log-likelihood {loglik:.10f}; scaled forward recursion {reference:.10f}; relative difference {relative:.1e}"
    )
    if relative > 1e-10:
        raise AssertionError("the scan log-likelihood disagrees with the scaled forward recursion")
    true_loglik = scaled_forward_loglik(np.log(true_A), true_means, sigma, y)
    return {
        "loglik": loglik,
        "reference": reference,
        "true_loglik": true_loglik,
        "trace": trace,
        "means": means,
        "A": A,
    }


if __name__ == "__main__":
    main()
