"""Real models end to end: the HMM forward algorithm in `scan`, against hand-written NumPy.

The regime is the motivating failure: emissions whose log-density is about +8 nats a
step, so the un-normalised forward message passes exp(709) (float64's limit) around
t ≈ 90 — here T = 5000.  References are independent: the scaled forward recursion for
the value, and the forward–backward posteriors for the gradient, both in plain NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg

K = 3
SIGMA = 1e-4  # emission scale: log N(y | mu, SIGMA²) ≈ 8.3 - z²/2 nats


def hmm_loglik(trans_logits, means, y, naive: bool = False):
    """log p(y) for K states, uniform start, Gaussian emissions N(means[k], SIGMA²); forward algorithm in scan."""
    log_A = sg.log_softmax(trans_logits, axis=1)
    z = (y[:, None] - means[None, :]) / SIGMA
    log_b = -0.5 * z * z - float(np.log(SIGMA * np.sqrt(2 * np.pi)))

    def step(log_alpha, log_b_t):
        scores = log_alpha[:, None] + log_A
        total = sg.log(sg.sum(sg.exp(scores), axis=0)) if naive else sg.logsumexp(scores, axis=0)
        return total + log_b_t, None

    final, _ = sg.scan(step, log_b[0] - float(np.log(K)), log_b[1:])
    return sg.logsumexp(final)


def compiled(dtype: str = "float64", naive: bool = False) -> sg.Function:
    L = sg.tensor("trans_logits", shape=(K, K), dtype=dtype)
    mu = sg.tensor("means", shape=(K,), dtype=dtype)
    y = sg.tensor("y", shape=(None,), dtype=dtype)
    loglik = hmm_loglik(L, mu, y, naive=naive)
    return sg.function([L, mu, y], [loglik, *sg.grad(loglik, [L, mu])])


def forward_backward(trans_logits: np.ndarray, means: np.ndarray, y: np.ndarray):
    """log p(y) and its gradient w.r.t. the transition logits and the means, by scaled forward–backward.

    With α̂_t, β̂_t the scaled messages and c_t the scales (log p = Σ log c_t):
      posteriors     γ_t(k) = α̂_t(k) β̂_t(k)
      pair counts    N(i, j) = Σ_t α̂_t(i) A(i, j) b_{t+1}(j) β̂_{t+1}(j) / c_{t+1}
      d/d logits     N(i, j) - A(i, j) Σ_j' N(i, j')        (log A = log_softmax(logits) by rows)
      d/d means      Σ_t γ_t(k) (y_t - μ_k) / σ²
    """
    T = len(y)
    A = np.exp(trans_logits - trans_logits.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    z = (y[:, None] - means[None, :]) / SIGMA
    log_b = -0.5 * z**2 - np.log(SIGMA * np.sqrt(2 * np.pi))
    shift = log_b.max(axis=1)
    b = np.exp(log_b - shift[:, None])
    alpha, c = np.empty((T, K)), np.empty(T)
    a = b[0] / K
    for t in range(T):
        if t:
            a = (alpha[t - 1] @ A) * b[t]
        c[t] = a.sum()
        alpha[t] = a / c[t]
    loglik = np.log(c).sum() + shift.sum()
    beta = np.empty((T, K))
    beta[-1] = 1.0
    for t in range(T - 2, -1, -1):
        beta[t] = A @ (b[t + 1] * beta[t + 1]) / c[t + 1]
    gamma = alpha * beta
    pairs = A * (alpha[:-1].T @ (b[1:] * beta[1:] / c[1:, None]))
    g_logits = pairs - A * pairs.sum(axis=1, keepdims=True)
    g_means = (gamma * z / SIGMA).sum(axis=0)
    return loglik, g_logits, g_means


def sample(T: int, seed: int = 0):
    """Observations from a sticky 3-state chain, and parameters to evaluate at (away from the truth)."""
    rng = np.random.default_rng(seed)
    A = np.full((K, K), 0.05) + np.eye(K) * 0.85
    true_means = SIGMA * np.array([-1.5, 0.0, 1.5])
    states = np.empty(T, dtype=np.int64)
    states[0] = rng.integers(K)
    for t in range(1, T):
        states[t] = rng.choice(K, p=A[states[t - 1]])
    y = true_means[states] + SIGMA * rng.standard_normal(T)
    logits = np.log(A) + 0.3 * rng.standard_normal((K, K))
    means = true_means + 0.2 * SIGMA * rng.standard_normal(K)
    return logits, means, y


@pytest.fixture(scope="module")
def long_chain():
    logits, means, y = sample(5000)
    return logits, means, y, forward_backward(logits, means, y)


def _assert_close(got: np.ndarray, expected: np.ndarray, rtol: float) -> None:
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=0)


def test_hmm_long_chain_loglik_and_gradient_match_forward_backward(long_chain):
    logits, means, y, (loglik, g_logits, g_means) = long_chain
    assert 7.0 < loglik / len(y) < 9.0  # ~8 nats a step: unscaled, the message leaves float64 at t ≈ 90
    got = compiled()(logits, means, y)
    assert np.isfinite(got[0])
    assert abs(got[0] - loglik) <= 1e-10 * abs(loglik)
    _assert_close(got[1], g_logits, rtol=1e-8)
    _assert_close(got[2], g_means, rtol=1e-8)


def test_hmm_long_chain_naive_logsumexp_in_the_step_gives_the_same_gradient(long_chain):
    logits, means, y, (loglik, g_logits, g_means) = long_chain
    got = compiled(naive=True)(logits, means, y)
    assert abs(got[0] - loglik) <= 1e-10 * abs(loglik)
    _assert_close(got[1], g_logits, rtol=1e-8)
    _assert_close(got[2], g_means, rtol=1e-8)


def test_hmm_float32_gradients_are_finite():
    logits, means, y = sample(1000, seed=1)
    loglik, g_logits, _ = forward_backward(logits, means, y)
    got = compiled("float32")(logits.astype(np.float32), means.astype(np.float32), y.astype(np.float32))
    assert all(v.dtype == np.float32 for v in got)
    assert all(np.all(np.isfinite(v)) for v in got)
    # float32 data and parameters: agreement to float32's resolution of SIGMA-scale quantities
    assert abs(got[0] - loglik) <= 1e-3 * abs(loglik)
    np.testing.assert_allclose(got[1], g_logits, rtol=0.05, atol=0.05 * np.abs(g_logits).max())


def test_hmm_naive_forward_in_probabilities_does_overflow():
    # the failure this library exists to fix, shown on the same data with plain NumPy
    logits, means, y = sample(200, seed=2)
    A = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    b = np.exp(-0.5 * ((y[:, None] - means) / SIGMA) ** 2) / (SIGMA * np.sqrt(2 * np.pi))
    alpha = b[0] / K
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(1, len(y)):
            alpha = (alpha @ A) * b[t]
    assert not np.all(np.isfinite(alpha))
