"""logsumexp value + gradient on a (1000, 1000) float64 matrix: stablegrad vs SciPy + NumPy.

Not a test.  The reference is `scipy.special.logsumexp(x, axis=1)` plus the
hand-written gradient `exp(x - lse[:, None]) * g[:, None]` of `sum(g * lse)`;
stablegrad compiles the value and `sg.grad` of the same cost into one function.

    python benchmarks/stable.py
"""

from __future__ import annotations

import timeit

import numpy as np
import scipy.special

import stablegrad as sg


def reference(x: np.ndarray, g: np.ndarray):
    lse = scipy.special.logsumexp(x, axis=1)
    return lse, np.exp(x - lse[:, None]) * g[:, None]


def main(n: int = 1000, repeat: int = 7, number: int = 5) -> None:
    rng = np.random.default_rng(0)
    x_value = 30.0 * rng.standard_normal((n, n))
    g_value = rng.standard_normal(n)
    x, g = sg.matrix("x"), sg.vector("g")
    lse = sg.logsumexp(x, axis=1)
    compiled = sg.function([x, g], [lse, sg.grad(sg.sum(g * lse), x)])

    ours, theirs = compiled(x_value, g_value), reference(x_value, g_value)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)

    t_ours = min(timeit.repeat(lambda: compiled(x_value, g_value), repeat=repeat, number=number)) / number
    t_ref = min(timeit.repeat(lambda: reference(x_value, g_value), repeat=repeat, number=number)) / number
    print(f"logsumexp value+grad, ({n}, {n}) float64")
    print(f"  stablegrad             {t_ours * 1e3:8.2f} ms")
    print(f"  scipy + numpy grad     {t_ref * 1e3:8.2f} ms")
    print(f"  ratio                  {t_ours / t_ref:8.2f}x  (target <= 1.3x)")


if __name__ == "__main__":
    main()
