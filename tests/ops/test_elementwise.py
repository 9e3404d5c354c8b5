"""Arithmetic, comparison, logic, selection and casts (stablegrad.ops.elementwise).

Every function is checked against NumPy for value, dtype and shape (static and run time)
over hypothesis-generated broadcasting shapes with size-0 and size-1 extents, with
static and with unknown (None) extents, and for its pullback against finite
differences at first and second order (or as exactly zero where it is piecewise
constant).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import elementwise as ew

from .helpers import (
    INTS,
    Spec,
    booleans,
    broadcastable,
    check_float32_pullback,
    check_pullback,
    check_value,
    evaluate,
    float32_examples,
    lattice,
    nonzero_integers,
    numpy_value,
    off_integers,
    pullback_examples,
    seeds,
    small_integers,
    specials,
    symbols,
    two_sided,
    uniform,
    value_examples,
)

REAL = uniform(-3, 3)
INT = small_integers(-5, 5)


def _mod_dividend(rng, shape, dtype):
    """1.5 (n + u), u in [0.1, 0.9]: x / y stays away from integers for y = ±1.5."""
    return np.asarray(1.5 * (rng.integers(-3, 3, shape, endpoint=True) + rng.uniform(0.1, 0.9, shape)), dtype)


def _mod_divisor(rng, shape, dtype):
    return np.asarray(rng.choice([-1.5, 1.5], shape) + rng.uniform(-0.01, 0.01, shape), dtype)


def _clip_operand(rng, shape, dtype):
    """Inside (-0.6, 0.6) or outside ±[1.4, 2]: away from the bounds drawn by _LO and _HI."""
    inside = rng.uniform(-0.6, 0.6, shape)
    outside = rng.choice([-1.0, 1.0], shape) * rng.uniform(1.4, 2.0, shape)
    return np.asarray(np.where(rng.random(shape) < 0.5, inside, outside), dtype)


_LO, _HI = uniform(-1.2, -0.8), uniform(0.8, 1.2)

SPECS = [
    # arithmetic (operators route to the NumPy-named functions)
    Spec("add", lambda x, y: x + y, np.add, (REAL, REAL), (ew.Add,), int_domains=(INT, INT)),
    Spec("add_fn", sg.add, np.add, (REAL, REAL), (ew.Add,)),
    Spec("subtract", lambda x, y: x - y, np.subtract, (REAL, REAL), (ew.Subtract,), int_domains=(INT, INT)),
    Spec("multiply", lambda x, y: x * y, np.multiply, (REAL, REAL), (ew.Multiply,), int_domains=(INT, INT)),
    Spec(
        "divide",
        lambda x, y: x / y,
        np.true_divide,
        (REAL, two_sided(0.5, 2)),
        (ew.Divide,),
        int_domains=(INT, nonzero_integers()),
    ),
    Spec(
        "floor_divide",
        lambda x, y: x // y,
        np.floor_divide,
        (_mod_dividend, _mod_divisor),
        (ew.FloorDivide,),
        grad="zero",
        int_domains=(small_integers(-9, 9), nonzero_integers()),
    ),
    Spec(
        "mod",
        lambda x, y: x % y,
        np.mod,
        (_mod_dividend, _mod_divisor),
        (ew.Mod,),
        int_domains=(small_integers(-9, 9), nonzero_integers()),
    ),
    Spec("negative", lambda x: -x, np.negative, (REAL,), (ew.Negative,), int_domains=(INT,)),
    Spec("abs", abs, np.abs, (two_sided(0.1, 3),), (ew.Abs,), int_domains=(INT,)),
    Spec("absolute", sg.absolute, np.absolute, (two_sided(0.1, 3),), (ew.Abs,)),
    Spec("square", sg.square, np.square, (REAL,), (ew.Square,), int_domains=(INT,)),
    Spec("sqrt", sg.sqrt, np.sqrt, (uniform(0.2, 4),), (ew.Sqrt,), int_domains=(small_integers(0, 9),)),
    Spec(
        "reciprocal",
        sg.reciprocal,
        lambda x: np.divide(1, x),
        (two_sided(0.3, 3),),
        (ew.Reciprocal, ew.Cast),
        int_domains=(nonzero_integers(),),
    ),
    Spec("maximum", sg.maximum, np.maximum, (lattice(0), lattice(1)), (ew.Maximum,), int_domains=(INT, INT)),
    Spec("minimum", sg.minimum, np.minimum, (lattice(0), lattice(1)), (ew.Minimum,), int_domains=(INT, INT)),
    Spec("sign", sg.sign, np.sign, (two_sided(0.1, 3),), (ew.Sign,), grad="zero", int_domains=(INT,)),
    Spec("floor", sg.floor, np.floor, (off_integers(),), (ew.Floor,), grad="zero"),
    Spec("ceil", sg.ceil, np.ceil, (off_integers(),), (ew.Ceil,), grad="zero"),
    Spec("round", sg.round, np.round, (off_integers(),), (ew.Round,), grad="zero"),
    Spec("round_decimals", lambda x: sg.round(x, 1), lambda x: np.round(x, 1), (REAL,), (ew.Round,), grad="zero"),
    # comparisons and logic: boolean results, the pullback hands back typed zeros
    *(
        Spec(name, fn, getattr(np, name), (small_integers(),) * 2, (ew.Compare,), grad="none", int_domains=(INT, INT))
        for name, fn in [
            ("less", lambda x, y: x < y),
            ("less_equal", lambda x, y: x <= y),
            ("greater", lambda x, y: x > y),
            ("greater_equal", lambda x, y: x >= y),
            ("equal", lambda x, y: x == y),
            ("not_equal", lambda x, y: x != y),
        ]
    ),
    *(
        Spec(name, fn, ref, (booleans(),) * nargs, (ew.Logical,), grad="none", dtypes=("bool",))
        for name, fn, ref, nargs in [
            ("logical_and", sg.logical_and, np.logical_and, 2),
            ("logical_or", sg.logical_or, np.logical_or, 2),
            ("logical_xor", sg.logical_xor, np.logical_xor, 2),
            ("logical_not", sg.logical_not, np.logical_not, 1),
            ("and_operator", lambda x, y: x & y, np.logical_and, 2),
            ("or_operator", lambda x, y: x | y, np.logical_or, 2),
            ("invert_operator", lambda x: ~x, np.logical_not, 1),
        ]
    ),
    Spec("logical_and_floats", sg.logical_and, np.logical_and, (small_integers(),) * 2, (ew.Logical,), grad="none"),
    *(
        Spec(name, getattr(sg, name), getattr(np, name), (specials(),), (ew.Logical,), grad="none")
        for name in ("isnan", "isinf", "isfinite")
    ),
    # selection
    Spec("where", sg.where, np.where, (booleans(), REAL, REAL), (ew.Where,), diff=(False, True, True)),
    Spec(
        "where_nonbool_condition",
        sg.where,
        lambda c, x, y: np.where(c, x, y),
        (small_integers(-1, 1), REAL, REAL),
        (ew.Where, ew.Cast),
        diff=(False, True, True),
    ),
    Spec("clip", sg.clip, np.clip, (_clip_operand, _LO, _HI), (ew.Clip,)),
    Spec("clip_method", lambda x, lo, hi: x.clip(lo, hi), np.clip, (_clip_operand, _LO, _HI), (ew.Clip,)),
    Spec(
        "clip_no_upper",
        lambda x, lo: sg.clip(x, lo, None),
        lambda x, lo: np.clip(x, lo, None),
        (_clip_operand, _LO),
        (ew.Clip,),
    ),
    Spec(
        "clip_no_lower",
        lambda x, hi: x.clip(max=hi),
        lambda x, hi: np.clip(x, None, hi),
        (_clip_operand, _HI),
        (ew.Clip,),
    ),
    Spec("relu", sg.relu, lambda x: np.maximum(x, 0), (two_sided(0.1, 3),), (ew.Where, ew.Compare), int_domains=(INT,)),
    # casts
    Spec(
        "astype_float32",
        lambda x: sg.astype(x, "float32"),
        lambda x: x.astype("float32"),
        (REAL,),
        (ew.Cast,),
        grad_rtol=1e-3,  # the value is rounded to float32, so finite differences carry ~1e-7 noise
    ),
    Spec(
        "astype_method_int", lambda x: x.astype("int32"), lambda x: x.astype("int32"), (REAL,), (ew.Cast,), grad="zero"
    ),
    Spec("astype_bool", lambda x: sg.astype(x, bool), lambda x: x.astype(bool), (INT,), (ew.Cast,), grad="zero"),
]

COVERED = {op for spec in SPECS for op in spec.ops}


def _dtypes(spec: Spec) -> tuple[str, ...]:
    return spec.dtypes + (INTS if spec.int_domains else ())


@pytest.mark.parametrize("spec", SPECS, ids=str)
@given(data=st.data())
@value_examples
def test_elementwise_value(spec, data):
    shapes = data.draw(broadcastable(spec.nargs)).input_shapes
    dtype = data.draw(st.sampled_from(_dtypes(spec)))
    check_value(spec, shapes, data.draw(seeds), dtype, data.draw(st.booleans()))


@pytest.mark.parametrize("spec", SPECS, ids=str)
@given(data=st.data())
@pullback_examples
def test_elementwise_pullback(spec, data):
    shapes = data.draw(broadcastable(spec.nargs)).input_shapes
    check_pullback(spec, shapes, data.draw(seeds), data.draw(st.booleans()))


@pytest.mark.parametrize("spec", [s for s in SPECS if s.grad == "fd" and "float32" in s.dtypes], ids=str)
@given(data=st.data())
@float32_examples
def test_elementwise_pullback_float32(spec, data):
    shapes = data.draw(broadcastable(spec.nargs)).input_shapes
    check_float32_pullback(spec, shapes, data.draw(seeds))


# -- NumPy 2 (NEP 50) dtype promotion: Python scalars are weak, arrays and NumPy scalars are not --
DTYPE_NAMES = ["float64", "float32", "int64", "int32", "int8", "uint8", "bool"]
PYTHON_SCALARS = [2.0, 3, True, 0.5]
BINARY = [
    ("add", lambda a, b: a + b),
    ("multiply", lambda a, b: a * b),
    ("subtract", lambda a, b: a - b),
    ("divide", lambda a, b: a / b),
    ("maximum", None),
    ("less", lambda a, b: a < b),
]


def _binary(name, fn):
    return fn if fn is not None else getattr(sg, name)


def _np_binary(name, fn):
    return fn if fn is not None else getattr(np, name)


@pytest.mark.parametrize(("name", "fn"), BINARY, ids=[b[0] for b in BINARY])
@given(dtype=st.sampled_from(DTYPE_NAMES), scalar=st.sampled_from(PYTHON_SCALARS), reflected=st.booleans())
def test_python_scalars_are_weak(name, fn, dtype, scalar, reflected):
    x = np.ones(3, dtype)
    if dtype == "bool" and name == "subtract":
        return  # NumPy has no boolean subtract; stablegrad's error for it is tested with the error paths
    args = (scalar, x) if reflected else (x, scalar)
    expected = numpy_value(lambda *a: _np_binary(name, fn)(*a), args)
    (v,) = symbols([x])
    sym_args = (scalar, v) if reflected else (v, scalar)
    out = _binary(name, fn)(*sym_args)
    value = sg.function([v], out)(x)
    assert out.dtype == value.dtype == expected.dtype, f"{dtype} {name} {scalar!r}: {out.dtype}, NumPy {expected.dtype}"
    np.testing.assert_array_equal(value, expected)


@pytest.mark.parametrize(("name", "fn"), BINARY, ids=[b[0] for b in BINARY])
@given(left=st.sampled_from(DTYPE_NAMES), right=st.sampled_from(DTYPE_NAMES))
def test_tensor_operands_promote_like_numpy_arrays(name, fn, left, right):
    a, b = np.ones(2, left), np.ones(2, right)
    if name == "subtract" and left == right == "bool":
        return  # as above
    expected = numpy_value(_np_binary(name, fn), [a, b])
    out, value = evaluate(_binary(name, fn), [a, b])
    assert out.dtype == value.dtype == expected.dtype


@given(dtype=st.sampled_from(DTYPE_NAMES), scalar=st.sampled_from([np.float64(2.0), np.float32(2.0), np.int64(3)]))
def test_numpy_scalars_are_strong(dtype, scalar):
    x = np.ones(2, dtype)
    (v,) = symbols([x])
    out = v * scalar
    expected = x * scalar
    assert out.dtype == sg.function([v], out)(x).dtype == expected.dtype


UNARY_FLOAT = [
    ("exp", sg.exp, np.exp),
    ("log1p", sg.log1p, np.log1p),
    ("sqrt", sg.sqrt, np.sqrt),
    ("sin", sg.sin, np.sin),
    ("tanh", sg.tanh, np.tanh),
    ("erf", sg.erf, sps.erf),
    ("gammaln", sg.gammaln, sps.gammaln),
    # integers go to the float type NumPy's float ufuncs pick for them (sqrt's), not reciprocal's truncation
    ("reciprocal", sg.reciprocal, lambda a: np.reciprocal(a.astype(np.sqrt(a).dtype))),
]


@pytest.mark.parametrize(("name", "fn", "ref"), UNARY_FLOAT, ids=[u[0] for u in UNARY_FLOAT])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "bool", "float32"])
def test_unary_float_functions_promote_like_numpy(name, fn, ref, dtype):
    x = np.arange(1, 4).astype(dtype)
    expected = numpy_value(ref, [x])
    out, value = evaluate(fn, [x])
    assert out.dtype == value.dtype == expected.dtype
    np.testing.assert_allclose(value, expected, rtol=1e-3 if expected.dtype == np.float16 else 1e-6)


def test_float32_stays_float32_with_symbolic_extents():
    """x.shape[i] is a Python int in NumPy, so it is weak: no promotion to float64 through it."""
    x32 = np.ones((2, 3), np.float32)
    for symbolic in (False, True):
        out, value = evaluate(lambda v: sg.sum(v, axis=1) / v.shape[1] + v.size * v[:, 0], [x32], symbolic)
        assert out.dtype == value.dtype == np.float32
        np.testing.assert_allclose(value, np.sum(x32, axis=1) / 3 + 6 * x32[:, 0])


def test_reflected_operators_with_arrays_on_the_left():
    x = np.array([1.5, 2.0, 3.0])
    a = np.array([4.0, 5.0, 6.0])
    for op in [
        lambda p, q: p + q,
        lambda p, q: p - q,
        lambda p, q: p * q,
        lambda p, q: p / q,
        lambda p, q: p // q,
        lambda p, q: p % q,
        lambda p, q: p**q,
    ]:
        out, value = evaluate(lambda v, op=op: op(a, v), [x])
        assert isinstance(out, sg.Variable)
        np.testing.assert_allclose(value, op(a, x), rtol=1e-15)
        _, value = evaluate(lambda v, op=op: op(2, v), [x])
        np.testing.assert_allclose(value, op(2, x), rtol=1e-15)


def test_relu_gradient_at_zero_is_zero_and_nan_stays_nan():
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.nan])
    (v,) = symbols([x])
    value, grad = sg.function([v], [sg.relu(v), sg.grad(sg.sum(sg.relu(v)), v)])(x)
    np.testing.assert_array_equal(value, np.maximum(x, 0))
    np.testing.assert_array_equal(grad[:4], [0.0, 0.0, 0.0, 1.0])


def test_clip_without_bounds_is_the_operand():
    x = np.array([-3.0, 0.5, 9.0])
    _, value = evaluate(lambda v: v.clip(), [x])
    np.testing.assert_array_equal(value, np.clip(x, None, None))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize(("lo", "hi"), [(None, 1), (1, None), (0, 1)])
def test_clip_with_one_bound_keeps_an_integer_dtype(dtype, lo, hi):
    x = np.array([0, 1, 2, 0], dtype)
    out, value = evaluate(lambda v: sg.clip(v, lo, hi), [x])
    assert out.dtype == value.dtype == np.clip(x, lo, hi).dtype
    np.testing.assert_array_equal(value, np.clip(x, lo, hi))
