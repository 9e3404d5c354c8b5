"""Probit regression at extreme margins, written with NumPy and SciPy calls.

    -log p(y | w) = -Σ_n log Φ(y_n · x_nᵀ w),   y_n ∈ {-1, +1}

With well-separated data and a few mislabelled points far from the boundary, the
margins of those points reach -100 and beyond.  There Φ underflows (Φ(-40) ≈ 4e-350 is 0 in float64), so
`np.log(scipy.special.ndtr(z))` is -inf and its gradient NaN; `scipy.special.log_ndtr`
keeps the value, and on stablegrad tensors it is `sg.log_ndtr`, whose gradient
φ(z)/Φ(z) ≈ -z stays finite too.  `negative_log_likelihood` is NumPy/SciPy code: on
arrays it gives a number, on tensors a graph.

Run:  python examples/probit.py
"""

from __future__ import annotations

import numpy as np
import scipy.special

import stablegrad as sg


def negative_log_likelihood(w, x, y):
    """-Σ log Φ(y · x w): NumPy/SciPy code, arrays or tensors alike."""
    return -np.sum(scipy.special.log_ndtr(y * np.dot(x, w)))


def build() -> sg.Function:
    w, x, y = sg.vector("w"), sg.matrix("x"), sg.vector("y")
    cost = negative_log_likelihood(w, x, y)
    return sg.function([w, x, y], [cost, sg.grad(cost, w)])


def data(n: int = 200, seed: int = 0):
    """Separable data at scale 30, with the labels of the four points farthest from the boundary flipped."""
    rng = np.random.default_rng(seed)
    x = 30.0 * rng.standard_normal((n, 2))
    score = x @ np.array([1.0, -1.0])
    y = np.sign(score)
    y[np.argsort(-np.abs(score))[:4]] *= -1
    return x, y


def main(steps: int = 40, rate: float = 1e-5, print_every: int = 10) -> dict:
    x, y = data()
    f = build()
    w = np.array([1.0, -1.0])  # the separating direction: the flipped points sit far on the wrong side
    with np.errstate(divide="ignore"):
        naive = -np.sum(np.log(scipy.special.ndtr(y * (x @ w))))
    print(f"margins reach {np.min(y * (x @ w)):.1f}; -Σ log(ndtr(·)) as written gives {naive}")
    trace = []
    for step in range(1, steps + 1):
        value, gradient = f(w, x, y)
        trace.append(float(value))
        if step % print_every == 0 or step == 1:
            print(
                f"step {step:3d}  -log p = {float(value):10.4f}  w = {np.round(w, 4)}  |grad| = {np.linalg.norm(gradient):.3g}"
            )
        w = w - rate * gradient
    value, gradient = f(w, x, y)
    reference = negative_log_likelihood(w, x, y)  # SciPy on arrays
    print(f"final -log p = {float(value):.10f}  (SciPy on arrays: {reference:.10f})")
    return {"w": w, "value": float(value), "reference": float(reference), "gradient": gradient, "trace": trace, "f": f}


if __name__ == "__main__":
    main()
