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
