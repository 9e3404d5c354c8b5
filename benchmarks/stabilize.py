"""`jax.jit(stabilize(naive))` against `jax.jit` of the same model stabilised by hand, side by side.

    python benchmarks/stabilize.py            # all cases
    python benchmarks/stabilize.py --quick    # fewer repetitions

Each case is a naive formula as users write it and the same model written with
`jax.nn` by hand; both sides are `jax.jit(jax.value_and_grad(...))`, compiled before
timing, called alternately, and compared by the median of their per-round ratios
(the target is 1.1x or less).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from stablegrad.jax import stabilize


def naive_rows(x):
    return jnp.sum(jnp.log(jnp.sum(jnp.exp(x), axis=1)))


def hand_rows(x):
    return jnp.sum(jax.nn.logsumexp(x, axis=1))


def naive_softmax_regression(w, x, y):
    logits = x @ w
    return -jnp.sum(y * jnp.log(jnp.exp(logits) / jnp.sum(jnp.exp(logits), axis=1, keepdims=True)))


def hand_softmax_regression(w, x, y):
    return -jnp.sum(y * jax.nn.log_softmax(x @ w, axis=1))


def naive_hmm(log_a, log_b, log_pi):
    def step(alpha, lb):
        return jnp.log(jnp.sum(jnp.exp(alpha[:, None] + log_a), axis=0)) + lb, None

    alpha, _ = jax.lax.scan(step, log_pi + log_b[0], log_b[1:])
    return jnp.log(jnp.sum(jnp.exp(alpha)))


def hand_hmm(log_a, log_b, log_pi):
    def step(alpha, lb):
        return jax.nn.logsumexp(alpha[:, None] + log_a, axis=0) + lb, None

    alpha, _ = jax.lax.scan(step, log_pi + log_b[0], log_b[1:])
    return jax.nn.logsumexp(alpha)


def cases(dtype) -> list[tuple[str, object, object, tuple]]:
    rng = np.random.default_rng(0)
    k, t = 8, 1000
    hmm = (
        np.log(rng.dirichlet(np.ones(k), size=k)),
        -rng.uniform(1.0, 30.0, size=(t, k)),
        np.log(np.ones(k) / k),
    )
    regression = (
        rng.normal(size=(256, 100)) * 0.1,
        rng.normal(size=(20000, 256)),
        np.eye(100)[rng.integers(0, 100, 20000)],
    )
    found = [
        ("W1 logsumexp rows 1000x1000", naive_rows, hand_rows, (rng.normal(size=(1000, 1000)),)),
        ("W2 softmax regression 20000x256x100", naive_softmax_regression, hand_softmax_regression, regression),
        (f"W3 HMM scan K={k} T={t}", naive_hmm, hand_hmm, hmm),
    ]
    return [(name, naive, hand, tuple(jnp.asarray(a, dtype) for a in args)) for name, naive, hand, args in found]


def side_by_side(ours, theirs, args, repeats: int) -> tuple[float, float, float]:
    """Median call times of both sides and the median of their per-round ratios (calls alternate)."""
    t_ours, t_theirs = [], []
    for _ in range(repeats):
        for fn, times in ((ours, t_ours), (theirs, t_theirs)):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
    ratio = statistics.median(a / b for a, b in zip(t_ours, t_theirs))
    return statistics.median(t_ours), statistics.median(t_theirs), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    options = parser.parse_args()
    repeats = 7 if options.quick else 31
    jax.config.update("jax_enable_x64", True)
    print(f"{'case':<40} {'dtype':<8} {'stabilize ms':>13} {'by hand ms':>11} {'ratio':>6}")
    for dtype in ("float32", "float64"):
        for name, naive, hand, args in cases(dtype):
            argnums = tuple(range(len(args) if name.startswith("W3") else 1))
            ours = jax.jit(jax.value_and_grad(stabilize(naive), argnums))
            theirs = jax.jit(jax.value_and_grad(hand, argnums))
            jax.block_until_ready((ours(*args), theirs(*args)))  # compiled before timing
            t_ours, t_theirs, ratio = side_by_side(ours, theirs, args, repeats)
            print(f"{name:<40} {dtype:<8} {t_ours * 1e3:>13.2f} {t_theirs * 1e3:>11.2f} {ratio:>5.2f}x")


if __name__ == "__main__":
    main()
