"""Reductions (stablegrad.ops.reduction): sum, prod, max, min, mean, var, std, argmax, argmin, any, all.

Each is checked against NumPy for value, dtype and shape over hypothesis shapes (size-0
and size-1 extents, static and unknown extents) and every `axis` form (int, negative int,
tuple, None) with and without `keepdims`; float reductions also for their pullback
against finite differences at first and second order.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import reduction as r
from stablegrad.ops.elementwise import Cast, Compare, Logical
from stablegrad.testing import check_grads

from .helpers import (
    FLOATS,
    assert_grad_exactly_zero,
    assert_same,
    assert_zero_pullback,
    distinct,
    evaluate,
    float32_examples,
    numpy_value,
    pullback_examples,
    seeds,
    shapes,
    symbols,
    value_examples,
)


def _real(rng, shape, dtype):
    return np.asarray(rng.uniform(-2, 2, shape), dtype)


def _with_zeros(rng, shape, dtype):
    """Mostly ±U(0.5, 1.5), with exact zeros: prod is a polynomial, smooth through them."""
    values = rng.choice([-1, 1], shape) * rng.uniform(0.5, 1.5, shape)
    return np.asarray(np.where(rng.random(shape) < 0.2, 0.0, values), dtype)


def _distinct(rng, shape, dtype):
    return distinct(rng, shape, dtype) if math.prod(shape) else np.zeros(shape, dtype)


def _ints(rng, shape, dtype):
    return np.asarray(rng.integers(-3, 3, shape, endpoint=True), dtype)


def _bools(rng, shape, dtype):
    return rng.random(shape) < 0.5


@dataclass(frozen=True)
class Reduction:
    """A reduction under test: `fn(x, axis, keepdims)` and its NumPy reference.

    `grad`: "fd" (finite differences), "none" (integer/boolean result: the pullback hands back
    typed zeros) or "zero" (a composite whose gradient must come out exactly zero).
    `min_count`: the pullback is checked only where each reduction covers more entries.
    `single_axis`: axis is an int or None only (argmax, argmin).
    `static_extents`: the reduced extents must be known (median), so inputs are never symbolic.
    """

    name: str
    fn: Callable
    ref: Callable
    domain: Callable
    ops: tuple[type, ...]
    grad: str = "fd"
    dtypes: tuple[str, ...] = (*FLOATS, "int64", "int32")
    min_count: int = 0
    single_axis: bool = False
    static_extents: bool = False

    def __str__(self) -> str:
        return self.name


def _kw(fn):
    return lambda x, axis, keepdims: fn(x, axis=axis, keepdims=keepdims)


def _numpy_median(x, axis, keepdims):
    """np.median; over no axes, the median of each entry alone, and with an empty result no
    entries (NumPy fails to reshape an empty x in both: `reshape(0, -1)` is ambiguous)."""
    if axis == ():
        return np.median(np.expand_dims(x, -1), axis=-1)
    shape = np.sum(x, axis=axis, keepdims=keepdims).shape
    if x.size == 0 and math.prod(shape) == 0:
        return np.empty(shape, dtype=np.median(np.zeros(1, x.dtype)).dtype)
    return np.median(x, axis=axis, keepdims=keepdims)


REDUCTIONS = [
    Reduction("sum", _kw(sg.sum), _kw(np.sum), _real, (r.Sum,)),
    Reduction("sum_method", lambda x, a, k: x.sum(axis=a, keepdims=k), _kw(np.sum), _real, (r.Sum,)),
    Reduction("prod", _kw(sg.prod), _kw(np.prod), _with_zeros, (r.Prod,)),
    Reduction("prod_method", lambda x, a, k: x.prod(axis=a, keepdims=k), _kw(np.prod), _with_zeros, (r.Prod,)),
    Reduction("max", _kw(sg.max), _kw(np.max), _distinct, (r.Max,), min_count=1),
    Reduction("max_method", lambda x, a, k: x.max(axis=a, keepdims=k), _kw(np.max), _distinct, (r.Max,), min_count=1),
    Reduction("amax", _kw(sg.amax), _kw(np.amax), _distinct, (r.Max,), min_count=1),
    Reduction("min", _kw(sg.min), _kw(np.min), _distinct, (r.Min,), min_count=1),
    Reduction("min_method", lambda x, a, k: x.min(axis=a, keepdims=k), _kw(np.min), _distinct, (r.Min,), min_count=1),
    Reduction("mean", _kw(sg.mean), _kw(np.mean), _real, (r.Sum, Cast), min_count=1),
    Reduction("mean_method", lambda x, a, k: x.mean(axis=a, keepdims=k), _kw(np.mean), _real, (r.Sum,), min_count=1),
    Reduction("var", _kw(sg.var), _kw(np.var), _real, (r.Sum,), min_count=1),
    Reduction(
        "var_ddof1",
        lambda x, a, k: sg.var(x, axis=a, ddof=1, keepdims=k),
        lambda x, a, k: np.var(x, axis=a, ddof=1, keepdims=k),
        _real,
        (r.Sum,),
        min_count=2,
    ),
    # std: distinct entries keep it away from 0, where sqrt has no derivative
    Reduction("std", _kw(sg.std), _kw(np.std), _distinct, (r.Sum,), min_count=2),
    Reduction(
        "std_ddof1",
        lambda x, a, k: sg.std(x, axis=a, ddof=1, keepdims=k),
        lambda x, a, k: np.std(x, axis=a, ddof=1, keepdims=k),
        _distinct,
        (r.Sum,),
        min_count=2,
    ),
    Reduction("median", _kw(sg.median), _numpy_median, _distinct, (r.Sum,), min_count=1, static_extents=True),
    Reduction("argmax", _kw(sg.argmax), _kw(np.argmax), _ints, (r.ArgExtremum,), grad="none", single_axis=True),
    Reduction("argmin", _kw(sg.argmin), _kw(np.argmin), _ints, (r.ArgExtremum,), grad="none", single_axis=True),
    Reduction(
        "argmax_method",
        lambda x, a, k: x.argmax(axis=a, keepdims=k),
        _kw(np.argmax),
        _ints,
        (r.ArgExtremum,),
        grad="none",
        single_axis=True,
    ),
    Reduction(
        "argmin_method",
        lambda x, a, k: x.argmin(axis=a, keepdims=k),
        _kw(np.argmin),
        _ints,
        (r.ArgExtremum,),
        grad="none",
        single_axis=True,
    ),
    Reduction("var_method", lambda x, a, k: x.var(axis=a, keepdims=k), _kw(np.var), _real, (r.Sum,), min_count=1),
    Reduction(
        "std_method_ddof1",
        lambda x, a, k: x.std(axis=a, ddof=1, keepdims=k),
        lambda x, a, k: np.std(x, axis=a, ddof=1, keepdims=k),
        _distinct,
        (r.Sum,),
        min_count=2,
    ),
    Reduction("any", _kw(sg.any), _kw(np.any), _bools, (r.Any,), grad="none", dtypes=("bool",)),
    Reduction("all", _kw(sg.all), _kw(np.all), _bools, (r.All,), grad="none", dtypes=("bool",)),
    Reduction("any_of_numbers", _kw(sg.any), _kw(np.any), _ints, (r.Any,), grad="none"),
    Reduction("all_of_numbers", _kw(sg.all), _kw(np.all), _ints, (r.All,), grad="none"),
    Reduction(
        "count_nonzero",
        lambda x, a, k: sg.count_nonzero(x, axis=a),
        lambda x, a, k: np.asarray(np.count_nonzero(x, axis=a), dtype=np.int64),
        _ints,
        (r.Sum, Compare, Logical),
        grad="zero",
    ),
]

COVERED = {op for spec in REDUCTIONS for op in spec.ops} | {r.CumSum, r.CumProd}


@st.composite
def reduction_args(draw, single_axis: bool, min_side: int = 0):
    """(shape, axis, keepdims) with axis None, an int (possibly negative) or a tuple."""
    shape = draw(shapes(max_dims=3, min_side=min_side))
    ndim = len(shape)
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if not single_axis:
            choices.append(hnp.valid_tuple_axes(ndim))
    elif not single_axis:
        choices.append(st.just(()))
    return shape, draw(st.one_of(*choices)), draw(st.booleans())


def _reduced_count(shape, axis) -> int:
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else axis
    return math.prod(shape[a] for a in axes)


@pytest.mark.parametrize("spec", REDUCTIONS, ids=str)
@given(data=st.data())
@value_examples
def test_reduction_value(spec, data):
    shape, axis, keepdims = data.draw(reduction_args(spec.single_axis))
    dtype = np.dtype(data.draw(st.sampled_from(spec.dtypes)))
    symbolic = data.draw(st.booleans()) and not spec.static_extents
    x = spec.domain(np.random.default_rng(data.draw(seeds)), shape, dtype)
    try:
        expected = numpy_value(lambda v: spec.ref(v, axis, keepdims), [x])
    except ValueError:  # NumPy refuses (max of an empty axis): so must we, at run time
        with pytest.raises(sg.ExecutionError):
            evaluate(lambda v: spec.fn(v, axis, keepdims), [x], symbolic)
        return
    out, value = evaluate(lambda v: spec.fn(v, axis, keepdims), [x], symbolic)
    assert_same(out, value, expected, symbolic, rtol=1e-5 if value.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("spec", REDUCTIONS, ids=str)
@given(data=st.data())
@pullback_examples
def test_reduction_pullback(spec, data):
    shape, axis, keepdims = data.draw(reduction_args(spec.single_axis, min_side=spec.min_count))
    symbolic = data.draw(st.booleans()) and not spec.static_extents
    x = spec.domain(np.random.default_rng(data.draw(seeds)), shape, np.dtype("float64"))
    if spec.grad == "none":
        assert_zero_pullback(spec.fn(symbols([x], symbolic)[0], axis, keepdims))
        return
    if spec.grad == "zero":
        assert_grad_exactly_zero(lambda v: spec.fn(v, axis, keepdims), [x], symbolic)
        return
    assume(_reduced_count(shape, axis) >= spec.min_count)
    check_grads(lambda v: spec.fn(v, axis, keepdims), [x], order=2, symbolic_shapes=symbolic)


@pytest.mark.parametrize("spec", [s for s in REDUCTIONS if s.grad == "fd"], ids=str)
@given(data=st.data())
@float32_examples
def test_reduction_pullback_float32(spec, data):
    shape, axis, keepdims = data.draw(reduction_args(spec.single_axis, min_side=spec.min_count))
    assume(_reduced_count(shape, axis) >= spec.min_count)
    x = spec.domain(np.random.default_rng(data.draw(seeds)), shape, np.dtype("float32"))
    grads = {}
    for dtype in ("float32", "float64"):
        (v,) = symbols([x.astype(dtype)])
        out = spec.fn(v, axis, keepdims)
        assert out.dtype == dtype
        grads[dtype] = sg.function([v], sg.grad(sg.sum(out * 0.75), v))(x.astype(dtype))
    assert grads["float32"].dtype == np.float32
    np.testing.assert_allclose(grads["float32"], grads["float64"], rtol=1e-4, atol=1e-5)


# -- edge semantics, against analytic values --------------------------------------------------------
def _gradient(fn, x):
    (v,) = symbols([np.asarray(x)])
    return sg.function([v], sg.grad(fn(v), v))(np.asarray(x))


@pytest.mark.parametrize(("fn", "x"), [(sg.max, [1.0, 3.0, 3.0, 2.0]), (sg.min, [2.0, -1.0, 5.0, -1.0])])
def test_extremum_ties_share_the_gradient(fn, x):
    expected = np.where(np.asarray(x) == np.asarray(x)[[1]], 0.5, 0.0)
    np.testing.assert_array_equal(_gradient(fn, x), expected)


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        ([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]),  # one zero: its gradient is the product of the others
        ([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]),  # two zeros: every partial product contains a zero
        ([2.0, -3.0, 0.5], [-1.5, 1.0, -6.0]),
        ([[0.0, 2.0], [4.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]),
    ],
)
def test_prod_gradient_at_zeros(x, expected):
    np.testing.assert_allclose(_gradient(sg.prod, x), expected, rtol=0, atol=0)


def test_prod_gradient_at_zeros_along_an_axis():
    x = [[0.0, 2.0], [4.0, 0.0]]
    np.testing.assert_allclose(_gradient(lambda v: sg.sum(sg.prod(v, axis=1)), x), [[2.0, 0.0], [0.0, 4.0]])


@pytest.mark.parametrize(
    ("x", "row", "expected"),
    [
        ([0.0, 2.0, 3.0], 1, [3.0, 0.0, 0.0]),  # d/dx (x0 x2) = (x2, 0, x0), though x0 = 0
        ([0.0, 2.0, 3.0], 0, [0.0, 3.0, 2.0]),
        ([0.0, 0.0, 3.0], 0, [0.0, 3.0, 0.0]),  # two zeros: d/dx1 (x1 x2) = x2
        ([0.0, 0.0, 0.0], 0, [0.0, 0.0, 0.0]),
    ],
)
def test_prod_hessian_at_zeros(x, row, expected):
    (v,) = symbols([np.zeros(3)])
    hessian_row = sg.grad(sg.grad(sg.prod(v), v)[row], v)
    np.testing.assert_allclose(sg.function([v], hessian_row)(np.array(x)), expected, rtol=0, atol=0)


@pytest.mark.parametrize("fn", [sg.argmax, sg.argmin, sg.any, sg.all])
def test_integer_and_boolean_reductions_have_zero_gradient(fn):
    (v,) = symbols([np.ones((2, 3))])
    cost = sg.sum(sg.astype(fn(v, axis=1), "float64")) + sg.sum(v) * 0.0
    np.testing.assert_array_equal(sg.function([v], sg.grad(cost, v))(np.arange(6.0).reshape(2, 3)), np.zeros((2, 3)))


@pytest.mark.parametrize("values", [[3.0], [2.0, 2.0, 2.0]], ids=["one entry", "all equal"])
def test_std_at_zero_variance_has_gradient_zero_and_nan_stays_nan(values):
    x = sg.vector("x")
    f = sg.function([x], [sg.std(x), sg.grad(sg.std(x), x), sg.grad(sg.sum(sg.grad(sg.std(x), x)), x)])
    value, grad, second = f(np.array(values))
    assert value == 0.0 and np.all(grad == 0.0) and np.all(np.isfinite(second))
    with np.errstate(invalid="ignore"):
        assert np.isnan(sg.function([x], sg.std(x, ddof=1))(np.array([3.0])))  # NumPy's 0/0 for too few entries
        assert np.isnan(sg.function([x], sg.std(x))(np.array([1.0, np.nan])))


# -- running sums and products: cumsum, cumprod ---------------------------------------------------------
CUMULATIVE = {
    "cumsum": (lambda x, axis, dtype: sg.cumsum(x, axis=axis, dtype=dtype), np.cumsum),
    "cumsum_method": (lambda x, axis, dtype: x.cumsum(axis=axis, dtype=dtype), np.cumsum),
    "cumprod": (lambda x, axis, dtype: sg.cumprod(x, axis=axis, dtype=dtype), np.cumprod),
    "cumprod_method": (lambda x, axis, dtype: x.cumprod(axis=axis, dtype=dtype), np.cumprod),
}


@st.composite
def cumulative_args(draw):
    """(shape, axis): axis None (the flattened array) or an int, possibly negative."""
    shape = draw(shapes(max_dims=3))
    axes = [st.none()] + ([st.integers(-len(shape), len(shape) - 1)] if shape else [])
    return shape, draw(st.one_of(*axes))


@pytest.mark.parametrize("name", list(CUMULATIVE))
@given(data=st.data())
@value_examples
def test_cumulative_value(name, data):
    fn, ref = CUMULATIVE[name]
    shape, axis = data.draw(cumulative_args())
    dtype = np.dtype(data.draw(st.sampled_from([*FLOATS, "int64", "int32", "bool"])))
    out_dtype = data.draw(st.sampled_from([None, "float64", "int64"]))
    symbolic = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(seeds))
    x = _bools(rng, shape, dtype) if dtype == np.bool_ else _with_zeros(rng, shape, dtype)
    expected = numpy_value(lambda v: ref(v, axis=axis, dtype=out_dtype), [x])
    out, value = evaluate(lambda v: fn(v, axis, out_dtype), [x], symbolic)
    assert_same(out, value, expected, symbolic, rtol=1e-5 if value.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("name", list(CUMULATIVE))
@given(data=st.data())
@pullback_examples
def test_cumulative_pullback(name, data):
    fn, _ = CUMULATIVE[name]
    shape, axis = data.draw(cumulative_args())
    # exact zeros included: a running product is a polynomial, smooth through them, and its
    # pullback treats them apart
    x = _with_zeros(np.random.default_rng(data.draw(seeds)), shape, np.dtype("float64"))
    check_grads(lambda v: fn(v, axis, None), [x], order=2, symbolic_shapes=data.draw(st.booleans()))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(data=st.data())
@float32_examples
def test_cumulative_pullback_float32(name, data):
    fn, _ = CUMULATIVE[name]
    shape, axis = data.draw(cumulative_args())
    x = _real(np.random.default_rng(data.draw(seeds)), shape, np.dtype("float32"))
    grads = {}
    for dtype in ("float32", "float64"):
        (v,) = symbols([x.astype(dtype)])
        out = fn(v, axis, None)
        assert out.dtype == dtype
        grads[dtype] = sg.function([v], sg.grad(sg.sum(out * 0.75), v))(x.astype(dtype))
    assert grads["float32"].dtype == np.float32
    np.testing.assert_allclose(grads["float32"], grads["float64"], rtol=1e-4, atol=1e-5)


def _cumprod_gradient_by_products(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """d/dx_j of Σ_i w_i Π_{k<=i} x_k, as the plain sum of products without x_j (no division)."""
    return np.array([sum(w[i] * np.prod(np.delete(x[: i + 1], j)) for i in range(j, len(x))) for j in range(len(x))])


@pytest.mark.parametrize(
    "x",
    [[2.0, 0.0, 3.0, 0.5], [0.0, 2.0, -1.5], [1.5, -2.0, 0.0], [0.0, 0.0, 2.0], [3.0, 0.0, 2.0, 0.0, 4.0], [0.0]],
)
def test_cumprod_gradient_at_zeros(x):
    x = np.array(x)
    w = np.arange(1.0, len(x) + 1)
    expected = _cumprod_gradient_by_products(x, w)
    np.testing.assert_allclose(_gradient(lambda v: sg.sum(sg.cumprod(v) * w), x), expected, rtol=1e-15, atol=0)


def _cumprod_hessian_by_products(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """d²/dx_j dx_m of Σ_i w_i Π_{k<=i} x_k: Σ_{i>=max(j, m)} w_i Π_{k<=i, k not j, m} x_k, 0 on the diagonal."""
    n = len(x)
    h = np.zeros((n, n))
    for j in range(n):
        for m in range(n):
            if j != m:
                h[j, m] = sum(w[i] * np.prod(np.delete(x[: i + 1], [j, m])) for i in range(max(j, m), n))
    return h


@pytest.mark.parametrize(
    "x", [[2.0, 0.0, 3.0, 0.5], [0.0, 2.0, 0.0, -1.5], [1.5, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0], [3.0, 2.0, 0.0]]
)
def test_cumprod_hessian_at_zeros(x):
    x = np.array(x)
    w = np.arange(1.0, len(x) + 1)
    (v,) = symbols([np.zeros(len(x))])
    gradient = sg.grad(sg.sum(sg.cumprod(v) * w), v)
    rows = sg.function([v], [sg.grad(gradient[j], v) for j in range(len(x))])(x)
    np.testing.assert_allclose(np.stack(rows), _cumprod_hessian_by_products(x, w), rtol=1e-15, atol=0)


@pytest.mark.parametrize("fn", [sg.cumsum, sg.cumprod])
def test_cumulative_axis_out_of_range_names_the_op_and_the_line(fn):
    x = sg.matrix("x")
    with pytest.raises(sg.ShapeError, match=f"{fn.__name__}: axis 2 is out of range") as info:
        fn(x, axis=2)
    assert info.value.location[0] == __file__
    with pytest.raises(sg.ShapeError, match=fn.__name__):
        fn(sg.scalar("s"), axis=0)  # a 0-d tensor has no axis 0, as in NumPy (axis=None flattens it)


def test_cumulative_of_a_scalar_with_no_axis_is_1d():
    out, value = evaluate(lambda v: sg.cumsum(v), [np.float64(2.5)])
    assert_same(out, value, np.cumsum(np.float64(2.5)), symbolic=False)


# -- ndarray.dot: a contraction, routed to sg.dot ------------------------------------------------------
@pytest.mark.parametrize(("a", "b"), [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((), (2,)), ((2, 2, 3), (3, 2))])
def test_dot_method(a, b):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(a), rng.standard_normal(b)
    out, value = evaluate(lambda u, v: u.dot(v), [x, y])
    assert_same(out, value, x.dot(y), symbolic=False)
    check_grads(lambda u, v: u.dot(v), [x, y], order=1)


@pytest.mark.parametrize(
    ("values", "axis"),
    [([3.0, np.nan, 1.0], None), ([[1.0, 2.0], [np.nan, 4.0]], 1), ([[1.0, 2.0], [np.nan, 4.0]], 0), ([], None)],
)
def test_median_is_nan_where_a_nan_or_nothing_is(values, axis):
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.median(x, axis=axis)
    np.testing.assert_array_equal(sg.median(sg.constant(x), axis=axis).eval(), expected)


def test_median_gradient_goes_to_the_middle_entries():
    odd, even = np.array([5.0, 1.0, 3.0]), np.array([4.0, 1.0, 3.0, 9.0])
    np.testing.assert_array_equal(_gradient(sg.median, odd), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(_gradient(sg.median, even), [0.5, 0.0, 0.5, 0.0])


def test_median_needs_static_extents_and_dispatches_from_numpy():
    with pytest.raises(sg.ShapeError, match=r"median: needs the extents of axes \(0,\) known statically") as info:
        sg.median(sg.matrix("m"), axis=0)
    assert info.value.location[0] == __file__
    m = sg.tensor("m", (3, 4))
    out = np.median(m, axis=0)
    assert isinstance(out, sg.Variable)
    x = np.random.default_rng(3).standard_normal((3, 4))
    np.testing.assert_array_equal(sg.function([m], out)(x), np.median(x, axis=0))
