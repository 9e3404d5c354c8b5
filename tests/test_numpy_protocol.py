"""NumPy's functions on symbolic tensors build graph: a model written with np.* runs unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.graph.numpy_protocol import NumPyProtocolError


def logistic_loss(w, X, y):
    """A NumPy model as written for arrays: no stablegrad call anywhere."""
    logits = np.dot(X, w)
    penalty = 0.5 * np.sum(np.square(w))
    return np.sum(np.logaddexp(0.0, logits) - y * logits) / np.shape(X)[0] + penalty


def gaussian_mixture(x, means, log_w):
    sq = np.square(x[:, None] - means[None, :])
    return np.sum(np.logaddexp.reduce(log_w[None, :] - 0.5 * sq, axis=1))


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return rng.standard_normal(4), rng.standard_normal((6, 4)), (rng.random(6) > 0.5).astype(float)


def test_a_numpy_model_runs_symbolically_unchanged(data):
    w, X, y = sg.vector("w"), sg.matrix("X"), sg.vector("y")
    cost = logistic_loss(w, X, y)
    assert isinstance(cost, sg.Variable)
    f = sg.function([w, X, y], [cost, sg.grad(cost, w)])
    value, gradient = f(*data)
    np.testing.assert_allclose(value, logistic_loss(*data), rtol=1e-14)
    # the gradient against central differences of the NumPy model itself
    w0, X0, y0 = data
    h = 1e-6
    numeric = [
        (logistic_loss(w0 + h * e, X0, y0) - logistic_loss(w0 - h * e, X0, y0)) / (2 * h) for e in np.eye(w0.size)
    ]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-7, atol=1e-9)


def test_numpy_reductions_of_ufuncs_are_the_stable_ones():
    x, means, log_w = sg.vector("x"), sg.vector("means"), sg.vector("log_w")
    cost = gaussian_mixture(x, means, log_w)
    f = sg.function([x, means, log_w], [cost, sg.grad(cost, log_w)])
    args = (np.array([0.0, 40.0]), np.array([-1.0, 1.0, 2.0]), np.array([-800.0, -801.0, -799.0]))
    value, gradient = f(*args)
    # as arrays, np.logaddexp.reduce is exact too; the symbolic one is logsumexp with its stable gradient
    np.testing.assert_allclose(value, gaussian_mixture(*args), rtol=1e-13)
    assert np.isfinite(gradient).all() and np.isclose(gradient.sum(), 2.0)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda x: np.exp(x), np.exp),
        (lambda x: np.maximum(x, 0.0), lambda v: np.maximum(v, 0.0)),
        (lambda x: np.where(x > 0, x, -x), np.abs),
        (lambda x: np.concatenate([x, 2 * x]), lambda v: np.concatenate([v, 2 * v])),
        (lambda x: np.ones(3) + x, lambda v: np.ones(3) + v),
        (lambda x: np.float32(2.0) * x, lambda v: np.float32(2.0) * v),
        (lambda x: np.add.reduce(x), np.sum),
        (lambda x: np.sum(x, keepdims=True), lambda v: np.sum(v, keepdims=True)),
        (lambda x: np.mean(x), np.mean),
        (lambda x: np.absolute(x), np.absolute),
        (lambda x: np.exp(x, dtype=np.float32), lambda v: np.exp(v, dtype=np.float32)),
    ],
)
def test_numpy_calls_agree_with_numpy_on_values(build, expected):
    x = sg.tensor("x", (3,))
    value = np.array([-1.5, 0.25, 2.0])
    result = sg.function([x], build(x))(value)
    reference = expected(value)
    assert result.shape == np.shape(reference) and result.dtype == np.asarray(reference).dtype
    np.testing.assert_allclose(result, reference, rtol=1e-15)


def test_static_facts_come_back_as_numbers():
    x = sg.tensor("x", (3, 4))
    assert np.ndim(x) == 2 and np.shape(x)[1] == 4


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda x: np.asarray(x), ["no values to convert", ".eval()", "sg.function"]),
        (lambda x: np.array([x, x]), ["no values to convert"]),
        (lambda x: np.fft.fft(x), ["np.fft.fft", "no symbolic counterpart"]),
        (lambda x: np.exp(x, out=np.zeros(3)), ["np.exp", "out="]),
        (lambda x: np.add.outer(x, x), ["np.add.outer", "no symbolic counterpart"]),
        (lambda x: np.exp(x, where=x > 0), ["np.exp", "where="]),
    ],
)
def test_what_has_no_symbolic_counterpart_says_so(call, words):
    x = sg.tensor("x", (3,))
    with pytest.raises(NumPyProtocolError) as error:
        call(x)
    assert all(w in str(error.value) for w in words), str(error.value)
    assert "test_numpy_protocol.py" in str(error.value)  # the user's line


def test_a_scipy_function_that_converts_its_argument_names_the_sg_one():
    special = pytest.importorskip("scipy.special")
    x = sg.tensor("x", (3,))
    with pytest.raises(NumPyProtocolError) as error:
        special.logsumexp(x)
    message = str(error.value)
    assert "scipy.special.logsumexp converts its argument" in message and "call sg.logsumexp instead" in message
    assert "test_numpy_protocol.py" in message  # the user's line, not SciPy's


def test_scipy_array_api_path_names_the_sg_function_too():
    """With SCIPY_ARRAY_API=1 (read when SciPy is imported, hence a fresh interpreter) SciPy asks the
    tensor for its array-API namespace; the answer is our error, not SciPy's "neither array API
    compatible nor coercible by NumPy"."""
    pytest.importorskip("scipy.special")
    script = (
        "import stablegrad as sg, scipy.special as special\n"
        "from stablegrad.graph.numpy_protocol import NumPyProtocolError\n"
        "try:\n"
        "    special.logsumexp(sg.tensor('x', (3,)))\n"
        "except NumPyProtocolError as error:\n"
        "    print(error)\n"
    )
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    message = result.stdout
    assert "scipy.special.logsumexp asks for an array-API namespace; call sg.logsumexp instead" in message, message
    assert "at <string>:4" in message  # the caller's line


def test_scipy_ufuncs_build_graph():
    special = pytest.importorskip("scipy.special")
    x = sg.tensor("x", (2,))
    value = np.array([-800.0, 3.0])
    got = sg.function([x], special.expit(x))(value)
    np.testing.assert_allclose(got, special.expit(value), rtol=1e-15)
