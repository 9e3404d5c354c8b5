"""A Gaussian-process marginal likelihood, written with NumPy calls, fitted by gradient descent.

    -log p(y | θ) = ½ yᵀ K⁻¹ y + ½ log det K + (n/2) log 2π,
    K = a² exp(-½ |x_i - x_j|² / ℓ²) + s² I,   θ = (log a, log ℓ, log s)

`negative_log_likelihood` is plain NumPy (`np.exp`, `np.linalg.cholesky`,
`np.linalg.solve`, `np.linalg.slogdet`): run on arrays it gives a number; run on
stablegrad tensors it builds a graph (NumPy hands each call to the tensor), whose
gradient in θ goes through solves, never an inverse.  The fit is checked against the
same function evaluated by NumPy.

Run:  python examples/gaussian_process.py
"""

from __future__ import annotations

import numpy as np

import stablegrad as sg


def negative_log_likelihood(log_params, x, y):
    """-log p(y | θ) for a squared-exponential kernel: NumPy code, arrays or tensors alike."""
    amplitude, length, noise = np.exp(log_params[0]), np.exp(log_params[1]), np.exp(log_params[2])
    sq = np.square(x[:, None] - x[None, :])
    k = amplitude**2 * np.exp(-0.5 * sq / length**2) + noise**2 * np.eye(np.shape(x)[0])
    alpha = np.linalg.solve(k, y)
    _, log_det = np.linalg.slogdet(k)
    return 0.5 * np.sum(y * alpha) + 0.5 * log_det + 0.5 * np.shape(x)[0] * np.log(2 * np.pi)


def build(n: int) -> sg.Function:
    """The value and the gradient in θ, compiled for n data points."""
    log_params, x, y = sg.vector("log_params"), sg.tensor("x", (n,)), sg.tensor("y", (n,))
    cost = negative_log_likelihood(log_params, x, y)
    return sg.function([log_params, x, y], [cost, sg.grad(cost, log_params)])


def main(n: int = 40, steps: int = 75, rate: float = 0.02, seed: int = 0, print_every: int = 25) -> dict:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3, 3, n))
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(n)
    f = build(n)
    theta = np.zeros(3)  # a = ℓ = s = 1
    trace = []
    for step in range(1, steps + 1):
        value, gradient = f(theta, x, y)
        trace.append(float(value))
        theta = theta - rate * gradient
        if step % print_every == 0 or step == 1:
            print(f"step {step:3d}  -log p = {float(value):9.4f}  a, ℓ, s = {np.round(np.exp(theta), 3)}")
    value, _ = f(theta, x, y)
    reference = negative_log_likelihood(theta, x, y)  # the same code, run by NumPy on arrays
    print(f"final -log p = {float(value):.10f}  (NumPy on arrays: {reference:.10f})")
    return {"theta": theta, "value": float(value), "reference": float(reference), "trace": trace, "f": f}


if __name__ == "__main__":
    main()
