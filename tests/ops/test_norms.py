"""`sg.linalg.norm` (stablegrad.ops.norms): numpy.linalg.norm's orders, axes and dtypes, values
against NumPy, gradients against finite differences, and the range and the gradient at 0
that NumPy's formula loses, against exact references.
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import norms
from stablegrad.testing import check_grads

from .helpers import assert_same, evaluate, numpy_value, pullback_examples, seeds, value_examples

COVERED = {norms.VectorNorm}

VECTOR_ORDERS = [None, 2, 1, 0, np.inf, -np.inf, 3, 0.5, -1.5]
MATRIX_ORDERS = [None, "fro", 1, -1, np.inf, -np.inf]


@st.composite
def norm_cases(draw):
    """(x, ord, axis, keepdims) in each of NumPy's forms of call; size-0 extents included for the
    orders NumPy itself defines there (not max/min of nothing)."""
    ndim = draw(st.integers(1, 3))
    form = draw(st.sampled_from(["all", "vector", "matrix"] if ndim >= 2 else ["all", "vector"]))
    if form == "all":
        ord, axis = None, None
    elif form == "vector":
        ord, axis = draw(st.sampled_from(VECTOR_ORDERS)), draw(st.integers(-ndim, ndim - 1))
    else:
        ord = draw(st.sampled_from(MATRIX_ORDERS))
        axis = tuple(draw(st.permutations(range(ndim)))[:2])
    reduced = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    extremum = ord in (np.inf, -np.inf, 1, -1) if form == "matrix" else ord in (np.inf, -np.inf)
    shape = draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1 if extremum else 0, max_side=4))
    if form == "matrix" and ord in (1, -1, np.inf, -np.inf) and 0 in [shape[a] for a in reduced]:
        shape = tuple(max(s, 1) for s in shape)
    rng = np.random.default_rng(draw(seeds))
    x = rng.standard_normal(shape) * 10.0 ** draw(st.integers(-3, 3))
    return x, ord, axis, draw(st.booleans())


@given(case=norm_cases(), symbolic=st.booleans())
@value_examples
def test_norm_value_matches_numpy(case, symbolic):
    x, ord, axis, keepdims = case
    out, value = evaluate(lambda v: sg.linalg.norm(v, ord, axis, keepdims), [x], symbolic)
    expected = numpy_value(lambda a: np.linalg.norm(a, ord, axis, keepdims), [x])
    assert_same(out, value, expected, symbolic, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
@pytest.mark.parametrize(("ord", "axis"), [(None, None), (1, 0), (np.inf, None), ("fro", None), (3, 1)])
def test_norm_dtypes_follow_numpy(dtype, ord, axis):
    x = (np.arange(6).reshape(2, 3) % 2 if dtype == "bool" else np.arange(6).reshape(2, 3) - 2).astype(dtype)
    out, value = evaluate(lambda v: sg.linalg.norm(v, ord, axis), [x])
    assert_same(out, value, np.linalg.norm(x, ord, axis), symbolic=False, rtol=1e-3 if dtype == "float16" else 1e-6)


@pytest.mark.parametrize(
    ("ord", "axis"),
    [
        (None, None),
        (2, 1),
        (1, 0),
        (np.inf, 1),
        (-np.inf, 0),
        (3, 1),
        ("fro", None),
        (1, (1, 0)),
        (np.inf, None),
        (-1, None),
    ],
)
@given(seed=seeds)
@pullback_examples
def test_norm_gradients_against_finite_differences(ord, axis, seed):
    rng = np.random.default_rng(seed)
    # distinct powers of 2 in size: no entry near 0, no two sums of them within h (no kinks)
    x = 2.0 ** (rng.permutation(12).reshape(3, 4) - 6.0) * rng.choice([-1.0, 1.0], (3, 4))
    check_grads(lambda v: sg.linalg.norm(v, ord, axis), [x], order=2, symbolic_shapes=bool(seed % 2))


def _exact_norm(values) -> float:
    """√Σ x² of float64 entries, to 30 digits."""
    with mpmath.workdps(30):
        return float(mpmath.sqrt(sum(mpmath.mpf(float(v)) ** 2 for v in values)))


SCALES = [("float64", s) for s in (1e300, 1e200, 1e160, 1.0, 1e-160, 1e-200, 1e-300)] + [
    ("float32", s) for s in (1e36, 1e25, 1e20, 1.0, 1e-20, 1e-30, 1e-35)
]


@pytest.mark.parametrize(("dtype", "scale"), SCALES)
def test_euclidean_norm_keeps_the_range_numpy_loses(dtype, scale):
    """3-4-5 and a tail at every magnitude the dtype holds: within 2 ulp of the exact norm, where
    NumPy's √Σx² overflows to inf or underflows to 0 (1e160 and 1e-160 already; float32: 1e20)."""
    x = (np.array([3.0, 4.0, 1e-3, -2.5]) * scale).astype(dtype)
    v = sg.tensor("v", x.shape, dtype)
    got = sg.function([v], sg.linalg.norm(v))(x)
    assert got.dtype == np.dtype(dtype)
    exact = _exact_norm(x)
    assert abs(float(got) - exact) <= 2 * np.spacing(np.asarray(exact, dtype=dtype)), (got, exact)


def test_euclidean_norm_is_numpy_to_rounding_in_the_ordinary_range():
    """No scaling there: the same √Σ x² (only the order of the sum may differ)."""
    x = np.random.default_rng(1).standard_normal((50, 7))
    a = sg.matrix("a")
    got = sg.function([a], [sg.linalg.norm(a), sg.linalg.norm(a, axis=1), sg.linalg.norm(a, "fro")])(x)
    for g, expected in zip(got, [np.linalg.norm(x), np.linalg.norm(x, axis=1), np.linalg.norm(x, "fro")]):
        np.testing.assert_allclose(g, expected, rtol=4e-16, atol=0)


def test_euclidean_gradient_at_zero_is_zero_and_exact_far_out():
    """0 at x = 0 (NumPy's formula: 0/0); x/‖x‖ at (3, 4)·2⁶⁰⁰, (3/5, 4/5) to an ulp."""
    x = sg.vector("x")
    grad = sg.function([x], sg.grad(sg.linalg.norm(x), x))
    np.testing.assert_array_equal(grad(np.zeros(3)), np.zeros(3))
    got = grad(np.array([3.0, 4.0]) * 2.0**600)
    np.testing.assert_allclose(got, [0.6, 0.8], rtol=2.3e-16, atol=0)
    m = sg.matrix("m")
    rows = sg.function([m], sg.grad(sg.sum(sg.linalg.norm(m, axis=1, keepdims=True)), m))
    np.testing.assert_allclose(rows(np.array([[0.0, 0.0], [3.0, 4.0]])), [[0.0, 0.0], [0.6, 0.8]], rtol=2.3e-16, atol=0)


def test_euclidean_hessian_is_the_projection_over_the_norm():
    """∇²‖x‖ = (I - x xᵀ/r²)/r, against the analytic form at a large scale."""
    x0 = np.array([3e100, -4e100, 12e100])
    r = 13e100
    x = sg.vector("x")
    g = sg.grad(sg.linalg.norm(x), x)
    hessian = sg.function([x], sg.jacobian(g, x))(x0)
    expected = (np.eye(3) - np.outer(x0, x0) / r**2) / r
    np.testing.assert_allclose(hessian, expected, rtol=1e-13, atol=1e-13 / r)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([np.inf, 1.0], np.inf), ([-np.inf, np.nan], np.nan), ([np.nan, 1.0], np.nan), ([], 0.0), ([0.0, -0.0], 0.0)],
)
def test_euclidean_norm_special_values(values, expected):
    x = np.array(values, dtype=np.float64)
    v = sg.vector("v")
    got = sg.function([v], sg.linalg.norm(v))(x)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.linalg.norm(x), expected)


def test_numpy_linalg_norm_dispatches_to_the_symbolic_norm():
    a = sg.matrix("a")
    out = np.linalg.norm(a, axis=1)
    assert isinstance(out, sg.Variable)
    x = np.random.default_rng(2).standard_normal((3, 5))
    np.testing.assert_allclose(sg.function([a], out)(x), np.linalg.norm(x, axis=1), rtol=4e-16, atol=0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: sg.linalg.norm(a, "nuc"), "norm: ord='nuc' needs singular values"),
        (lambda a: sg.linalg.norm(a, 2), "norm: ord=2 needs singular values"),
        (lambda a: sg.linalg.norm(a, 3), "norm: invalid order 3 for a matrix norm"),
        (lambda a: sg.linalg.norm(a, "fro", axis=0), "norm: invalid order 'fro' for a vector norm"),
        (lambda a: sg.linalg.norm(a, axis=(0, 0)), r"norm: repeated axis in \(0, 0\)"),
        (lambda a: sg.linalg.norm(a, axis=(0, 1, 0)), "norm: axis must be an int or a pair of ints"),
        (lambda a: sg.linalg.norm(a, axis=2), "norm: axis 2 is out of range"),
        (lambda a: sg.linalg.norm(sg.tensor("t", (2, 2, 2)), 1), r"norm: ord=1 needs a 1-d or 2-d x"),
        (lambda a: sg.linalg.norm(sg.tensor("c", (2,), "complex128")), "norm: complex inputs are not supported"),
    ],
)
def test_norm_errors_name_the_argument(call, message):
    with pytest.raises(sg.StableGradError, match=message):
        call(sg.matrix("a"))
