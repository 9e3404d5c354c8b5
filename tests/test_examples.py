"""The examples run, in small configurations, and do what they claim."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    module_name = f"stablegrad_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def test_hmm_example_fits_and_agrees_with_the_scaled_recursion(capsys):
    hmm = load("hmm")
    result = hmm.main(n_states=2, T=150, iterations=12, print_every=4, seed=1)
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iter")]
    assert len(progress) == 4  # iterations 1, 4, 8, 12
    assert abs(result["loglik"] - result["reference"]) <= 1e-10 * abs(result["reference"])
    assert result["trace"][-1] > result["trace"][0]
    assert np.isfinite(result["loglik"])


def test_hmm_example_named_variant_equals_the_positional_model():
    hmm = load("hmm")
    rng = np.random.default_rng(5)
    logits, means, y = rng.standard_normal((3, 3)), np.array([-2.0, 0.0, 2.0]), rng.standard_normal(2000) * 3
    positional, named = hmm.build(3, 0.5), hmm.build_named(3, 0.5)
    got, want = named.value_and_grad(logits, means, y), positional.value_and_grad(logits, means, y)
    assert all(np.isfinite(g).all() for g in got)
    for g, w in zip(got, want):  # the same positional graph underneath: the same numbers
        np.testing.assert_array_equal(g, w)


def test_hmm_example_scaled_recursion_matches_brute_force_enumeration():
    # the example's own NumPy check, against summing over every state path of a short chain
    hmm = load("hmm")
    rng = np.random.default_rng(3)
    logits, means, sigma, y = rng.standard_normal((2, 2)), np.array([-1.0, 1.0]), 0.7, rng.standard_normal(6)
    A = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    density = np.exp(-0.5 * ((y[:, None] - means) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
    total = 0.0
    for path in np.ndindex(*(2,) * len(y)):
        p = 0.5 * density[0, path[0]]
        for t in range(1, len(y)):
            p *= A[path[t - 1], path[t]] * density[t, path[t]]
        total += p
    assert np.isclose(hmm.scaled_forward_loglik(logits, means, sigma, y), np.log(total), rtol=1e-13)


def test_mixture_example_is_finite_with_zero_weights():
    mixture = load("mixture")
    result = mixture.main(n=60, iterations=5)
    for name in ("b=weights", "log_weights + ..."):
        value, *grads = result[name]
        assert np.isfinite(value)
        assert all(np.all(np.isfinite(g)) for g in grads)
    assert np.isfinite(result["final"])


def test_softmax_regression_example_trains():
    softmax_regression = load("softmax_regression")
    result = softmax_regression.main(n=120, iterations=40)
    losses = result["losses"]
    assert np.isclose(losses[0], np.log(4), rtol=1e-14)  # zero weights: uniform over 4 classes
    assert losses[-1] < 0.25 * losses[0]
    assert result["accuracy"] > 0.9


def test_gaussian_process_example_is_numpy_code_with_our_gradient(capsys):
    gp = load("gaussian_process")
    result = gp.main(n=25, steps=30, print_every=10)
    assert "NumPy on arrays" in capsys.readouterr().out
    assert result["trace"][-1] < result["trace"][0] - 10
    np.testing.assert_allclose(result["value"], result["reference"], rtol=1e-12)
    # the gradient at the fitted θ against central differences of the NumPy function on arrays
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3, 3, 25))
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(25)
    theta = result["theta"] + np.array([0.3, -0.2, 0.4])
    _, gradient = result["f"](theta, x, y)
    h = 1e-6
    numeric = [
        (gp.negative_log_likelihood(theta + h * e, x, y) - gp.negative_log_likelihood(theta - h * e, x, y)) / (2 * h)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)


def test_probit_example_is_finite_where_the_naive_formula_is_not(capsys):
    import scipy.special

    probit = load("probit")
    x, y = probit.data()
    w = np.array([1.0, -1.0])
    z = y * (x @ w)
    assert z.min() < -100
    with np.errstate(divide="ignore"):
        assert np.isinf(np.sum(np.log(scipy.special.ndtr(z))))
    value, gradient = probit.build()(w, x, y)
    np.testing.assert_allclose(value, -np.sum(scipy.special.log_ndtr(z)), rtol=1e-13)
    # d/dw = -Σ y x φ(z)/Φ(z), the ratio computed in logs with SciPy: exp(log φ(z) - log Φ(z))
    # (exp of a difference of terms near z²/2 ≈ 8000: the reference itself carries ~1e-12)
    ratio = np.exp(-0.5 * z**2 - 0.5 * np.log(2 * np.pi) - scipy.special.log_ndtr(z))
    np.testing.assert_allclose(gradient, -(y * ratio) @ x, rtol=1e-10)
    result = probit.main(steps=30, print_every=10)
    assert "SciPy on arrays" in capsys.readouterr().out
    assert result["trace"][-1] < 100 < result["trace"][0]
    np.testing.assert_allclose(result["value"], result["reference"], rtol=1e-12)
