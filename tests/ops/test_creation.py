"""Tensors made from a shape (stablegrad.ops.creation): zeros, ones, full, the *_like forms,
arange, linspace, eye, identity, tril/triu — with static shapes and with shapes taken from
symbolic extents.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import creation as cr
from stablegrad.testing import check_grads

from .helpers import assert_same, assert_zero_pullback, evaluate, pullback_examples, seeds, shapes, symbols

COVERED = {cr.Alloc, cr.Arange}

DTYPES = ["float64", "float32", "int64", "int32", "bool"]


@given(shape=shapes(), dtype=st.sampled_from(DTYPES))
def test_zeros_and_ones(shape, dtype):
    for fn, ref in [(sg.zeros, np.zeros), (sg.ones, np.ones)]:
        out, value = evaluate(lambda fn=fn: fn(shape, dtype=dtype), [])
        assert_same(out, value, ref(shape, dtype=dtype), symbolic=False)
    out, value = evaluate(lambda: sg.zeros(shape), [])
    assert_same(out, value, np.zeros(shape), symbolic=False)


@given(
    shape=shapes(), fill=st.sampled_from([2.5, 3, True, np.float32(1.5), -1]), dtype=st.sampled_from([None, *DTYPES])
)
def test_full(shape, fill, dtype):
    out, value = evaluate(lambda: sg.full(shape, fill, dtype=dtype), [])
    assert_same(out, value, np.full(shape, fill, dtype=dtype), symbolic=False)


@given(shape=shapes(), seed=seeds, symbolic=st.booleans(), dtype=st.sampled_from([None, *DTYPES]))
def test_like_forms_follow_the_operand(shape, seed, symbolic, dtype):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    for fn, ref in [
        (sg.zeros_like, np.zeros_like),
        (sg.ones_like, np.ones_like),
        (lambda v, dtype: sg.full_like(v, 7, dtype=dtype), lambda v, dtype: np.full_like(v, 7, dtype=dtype)),
    ]:
        out, value = evaluate(lambda v, fn=fn: fn(v, dtype=dtype), [x], symbolic)
        assert_same(out, value, ref(x, dtype=dtype), symbolic)


@given(shape=shapes(), seed=seeds, symbolic=st.booleans())
@pullback_examples
def test_full_of_a_symbolic_value_and_shape(shape, seed, symbolic):
    """Alloc: fill value broadcast to a shape given by extents; its pullback sums the cotangent."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    value_shape = shape[len(shape) // 2 :]
    fill = rng.standard_normal(value_shape)
    out, value = evaluate(lambda v, f: sg.full(v.shape, f), [x, fill], symbolic)
    assert_same(out, value, np.broadcast_to(fill, shape), symbolic)
    check_grads(lambda f: sg.full(shape, f), [fill], order=2)
    check_grads(lambda v, f: sg.full(v.shape, f) * v, [x, fill], order=2, symbolic_shapes=symbolic)


@given(shape=shapes(), seed=seeds, symbolic=st.booleans())
def test_like_forms_have_zero_gradient(shape, seed, symbolic):
    x = np.random.default_rng(seed).standard_normal(shape)
    (v,) = symbols([x], symbolic)
    cost = sg.sum(sg.ones_like(v) * 2.0 + sg.zeros_like(v) + sg.full_like(v, 3.0))
    g = sg.function([v], sg.grad(cost, v, disconnected="zero"))(x)
    assert g.shape == x.shape and np.all(g == 0)


ARANGE_ARGS = [(5,), (0,), (2, 7), (7, 2), (1, 8, 3), (8, 1, -2), (0.5, 3.0), (0.0, 1.0, 0.25), (3, -3, -1.5)]


@pytest.mark.parametrize("args", ARANGE_ARGS)
@pytest.mark.parametrize("dtype", [None, "float32", "int32"])
def test_arange_static(args, dtype):
    expected = np.arange(*args, dtype=dtype)
    out, value = evaluate(lambda: sg.arange(*args, dtype=dtype), [])
    assert_same(out, value, expected, symbolic=False)


@given(
    n=st.integers(0, 5),
    start=st.integers(-2, 2),
    step=st.sampled_from([1, 2, 3]),
    dtype=st.sampled_from([None, "float64"]),
)
def test_arange_with_a_symbolic_stop(n, start, step, dtype):
    """arange(start, x.shape[0], step): the Arange op, run-time length."""
    x = np.zeros(n)
    out, value = evaluate(lambda v: sg.arange(start, v.shape[0], step, dtype=dtype), [x], symbolic=True)
    assert isinstance(out.owner.op, cr.Arange)
    assert_same(out, value, np.arange(start, n, step, dtype=dtype), symbolic=True)
    assert_zero_pullback(out)


@pytest.mark.parametrize(("n", "m", "k"), [(3, None, 0), (3, 4, 1), (4, 2, -1), (0, None, 0), (2, 2, 5)])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_eye_and_identity(n, m, k, dtype):
    out, value = evaluate(lambda: sg.eye(n, m, k, dtype=dtype), [])
    assert_same(out, value, np.eye(n, m, k, dtype=dtype), symbolic=False)
    out, value = evaluate(lambda: sg.identity(n, dtype=dtype), [])
    assert_same(out, value, np.identity(n, dtype=dtype), symbolic=False)


LINSPACE_ENDS = st.sampled_from([(0.0, 1.0), (2, 7), (0.3, -7.1), (5.0, 5.0), (-1e10, 3.5), (np.float32(0.5), 2)])


@given(
    ends=LINSPACE_ENDS,
    num=st.integers(0, 7),
    endpoint=st.booleans(),
    dtype=st.sampled_from([None, "float64", "float32", "int64"]),
    symbolic_ends=st.booleans(),
)
def test_linspace(ends, num, endpoint, dtype, symbolic_ends):
    """Static ends give NumPy's array; 0-d tensor ends the same values to the last bit."""
    start, stop = (np.asarray(e) for e in ends) if symbolic_ends else ends  # arrays: NumPy's promotion of arrays
    expected = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    if symbolic_ends:
        arrays = [start, stop]
        out, value = evaluate(lambda a, b: sg.linspace(a, b, num, endpoint=endpoint, dtype=dtype), arrays)
    else:
        out, value = evaluate(lambda: sg.linspace(start, stop, num, endpoint=endpoint, dtype=dtype), [])
    assert_same(out, value, expected, symbolic=False, rtol=0)


@given(num=st.integers(1, 6), endpoint=st.booleans(), seed=seeds)
def test_linspace_is_differentiable_in_its_ends(num, endpoint, seed):
    ends = list(np.random.default_rng(seed).standard_normal(2))
    check_grads(lambda a, b: sg.linspace(a, b, num, endpoint=endpoint), ends, order=2)


@given(ends=LINSPACE_ENDS, num=st.integers(0, 7), endpoint=st.booleans(), symbolic_ends=st.booleans())
def test_linspace_returns_its_step(ends, num, endpoint, symbolic_ends):
    start, stop = (np.asarray(e) for e in ends) if symbolic_ends else ends
    expected, expected_step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    if symbolic_ends:
        a, b = (sg.tensor(n, shape=(), dtype=np.asarray(e).dtype) for n, e in zip("ab", (start, stop)))
        values, step = sg.function([a, b], list(sg.linspace(a, b, num, endpoint=endpoint, retstep=True)))(start, stop)
    else:
        values, step = (v.eval() for v in sg.linspace(start, stop, num, endpoint=endpoint, retstep=True))
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(step, expected_step)  # (NaN where there is no step: num < 2 with the endpoint)


def test_linspace_places_array_ends_along_axis():
    start, stop = np.array([0.0, 1.0]), np.array([1.0, 3.0])
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(
            sg.linspace(start, stop, 3, axis=axis).eval(), np.linspace(start, stop, 3, axis=axis)
        )
    with pytest.raises(sg.ShapeError, match="linspace: axis 1 is out of bounds"):
        sg.linspace(sg.scalar("a"), 1.0, 3, axis=1)


def test_linspace_refuses_a_negative_num():
    with pytest.raises(sg.ShapeError, match="linspace: num must be a non-negative int") as info:
        sg.linspace(0.0, 1.0, -1)
    assert info.value.location[0] == __file__


@given(shape=shapes(min_dims=1, max_dims=3), k=st.integers(-4, 4), seed=seeds, symbolic=st.booleans())
@pullback_examples
def test_tril_and_triu(shape, k, seed, symbolic):
    """On the last two axes (a 1-d x against its own square mask, as NumPy); the gradient is masked too."""
    x = np.random.default_rng(seed).standard_normal(shape)
    for fn, ref in [(sg.tril, np.tril), (sg.triu, np.triu)]:
        for values in (x, x.astype(np.float32), (x > 0).astype(np.int32), x > 0):
            out, value = evaluate(lambda v, fn=fn: fn(v, k), [values], symbolic)
            assert_same(out, value, ref(values, k), symbolic)
        check_grads(lambda v, fn=fn: fn(v, k), [x], order=2, symbolic_shapes=symbolic)


def test_tril_of_a_scalar_is_refused():
    with pytest.raises(sg.ShapeError, match="tril: input must be at least 1-d") as info:
        sg.tril(sg.scalar("s"))
    assert info.value.location[0] == __file__
