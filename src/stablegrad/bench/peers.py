"""The same formulas written by hand in JAX (`jax.jit` of `jax.value_and_grad`) and in Numba kernels.

Each `*_model(case)` returns a function with the contract of `sg.function`: NumPy arrays in,
a list of NumPy arrays out (value first, then the gradients), so that every column of the
table times the same thing.  JAX and Numba are imported on the first call of these, after
`threads.limit_threads` has set their thread variables.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .workloads import HALF_LOG_2PI, Case, Model


# -- JAX -------------------------------------------------------------------------------------------------
def jax_model(case: Case) -> Model:
    """`jax.jit(jax.value_and_grad(cost))` of the case's formula, with jax.nn's logsumexp and log_softmax."""
    import jax

    cost, argnums = _jax_costs()[case.workload]
    jitted = jax.jit(jax.value_and_grad(cost, argnums=argnums))

    def call(*args):
        # float64 needs JAX's 64-bit mode; like backend="jax", only for this call (the flag is global otherwise)
        with jax.enable_x64(True):
            value, grads = jitted(*args)
            return [np.asarray(value), *(np.asarray(g) for g in grads)]  # np.asarray waits for the result

    return call


def _jax_costs() -> dict[str, tuple[Callable, tuple[int, ...]]]:
    """workload -> (its cost in jax.numpy, the positions of the arguments it is differentiated by)."""
    import jax
    import jax.numpy as jnp

    def logsumexp_cost(x, w):
        return jnp.sum(w * jax.nn.logsumexp(x, axis=-1))

    def hmm_cost(log_a, log_b):
        def step(alpha, log_b_t):
            return jax.nn.logsumexp(alpha[:, None] + log_a, axis=0) + log_b_t, None

        final, _ = jax.lax.scan(step, log_b[0] - math.log(log_a.shape[0]), log_b[1:])
        return jax.nn.logsumexp(final)

    def mixture_cost(x, mu, log_sigma, logits):
        z = (x[:, None] - mu[None, :]) * jnp.exp(-log_sigma)[None, :]
        lp = jax.nn.log_softmax(logits) - log_sigma - HALF_LOG_2PI - 0.5 * z * z
        return jnp.sum(jax.nn.logsumexp(lp, axis=1))

    return {"W1": (logsumexp_cost, (0,)), "W3": (hmm_cost, (0, 1)), "W5": (mixture_cost, (1, 2, 3))}


# -- Numba -----------------------------------------------------------------------------------------------
_KERNELS: dict[str, object] = {}


def numba_model(case: Case) -> Model:
    """A serial `numba.njit` kernel of the case's formula and its gradient, derived by hand."""
    kernel = _numba_kernels()[case.workload]

    def call(*args):
        return [np.asarray(out) for out in kernel(*args)]

    return call


def _numba_kernels() -> dict:
    """Compiled lazily (numba.njit compiles each signature on its first call: the "first call" column)."""
    if _KERNELS:
        return _KERNELS
    import numba

    # no cache=True: the package may be installed read-only, and the first call is meant to show compilation
    jit = numba.njit(nogil=True)

    @jit
    def logsumexp_kernel(x, w):
        rows, cols = x.shape
        g = np.empty_like(x)
        total = 0.0
        for r in range(rows):
            m = -np.inf
            for c in range(cols):
                m = max(m, x[r, c])
            s = 0.0
            for c in range(cols):
                e = math.exp(x[r, c] - m)
                g[r, c] = e
                s += e
            total += w[r] * (m + math.log(s))
            scale = w[r] / s
            for c in range(cols):
                g[r, c] *= scale
        return total, g

    @jit
    def hmm_kernel(log_a, log_b):
        steps, states = log_b.shape
        alpha = np.empty_like(log_b)
        for j in range(states):
            alpha[0, j] = log_b[0, j] - math.log(states)
        for t in range(1, steps):
            for j in range(states):
                m = -np.inf
                for i in range(states):
                    m = max(m, alpha[t - 1, i] + log_a[i, j])
                s = 0.0
                for i in range(states):
                    s += math.exp(alpha[t - 1, i] + log_a[i, j] - m)
                alpha[t, j] = m + math.log(s) + log_b[t, j]
        last = steps - 1
        m = -np.inf
        for j in range(states):
            m = max(m, alpha[last, j])
        g = np.empty(states)
        s = 0.0
        for j in range(states):
            g[j] = math.exp(alpha[last, j] - m)
            s += g[j]
        for j in range(states):
            g[j] /= s
        g_a = np.zeros_like(log_a)
        g_b = np.empty_like(log_b)
        previous = np.empty(states)
        for t in range(last, 0, -1):  # the recursion in reverse: the softmax weights of each step
            for j in range(states):
                g_b[t, j] = g[j]
                previous[j] = 0.0
            for j in range(states):
                shift = alpha[t, j] - log_b[t, j]
                for i in range(states):
                    p = g[j] * math.exp(alpha[t - 1, i] + log_a[i, j] - shift)
                    g_a[i, j] += p
                    previous[i] += p
            g, previous = previous, g
        for j in range(states):
            g_b[0, j] = g[j]
        return m + math.log(s), g_a, g_b

    @jit
    def mixture_kernel(x, mu, log_sigma, logits):
        k = mu.shape[0]
        shift = -np.inf
        for c in range(k):
            shift = max(shift, logits[c])
        norm = 0.0
        for c in range(k):
            norm += math.exp(logits[c] - shift)
        logw, inv, offset = np.empty(k), np.empty(k), np.empty(k)
        for c in range(k):
            logw[c] = logits[c] - shift - math.log(norm)
            inv[c] = math.exp(-log_sigma[c])
            offset[c] = logw[c] - log_sigma[c] - HALF_LOG_2PI
        e = np.empty(k)
        counts, rz, rzz = np.zeros(k), np.zeros(k), np.zeros(k)
        total = 0.0
        for n in range(x.shape[0]):  # one pass over the points; a point's K terms fit in a cache line
            m = -np.inf
            for c in range(k):
                z = (x[n] - mu[c]) * inv[c]
                e[c] = offset[c] - 0.5 * z * z
                m = max(m, e[c])
            s = 0.0
            for c in range(k):
                e[c] = math.exp(e[c] - m)
                s += e[c]
            total += m + math.log(s)
            for c in range(k):
                r = e[c] / s
                z = (x[n] - mu[c]) * inv[c]
                counts[c] += r
                rz[c] += r * z
                rzz[c] += r * z * z
        g_mu, g_log_sigma, g_logits = np.empty(k), np.empty(k), np.empty(k)
        n_total = 0.0
        for c in range(k):
            n_total += counts[c]
        for c in range(k):
            g_mu[c] = rz[c] * inv[c]
            g_log_sigma[c] = rzz[c] - counts[c]
            g_logits[c] = counts[c] - math.exp(logw[c]) * n_total
        return total, g_mu, g_log_sigma, g_logits

    _KERNELS.update(W1=logsumexp_kernel, W3=hmm_kernel, W5=mixture_kernel)
    return _KERNELS
