"""Indexing (stablegrad.ops.indexing): basic and advanced `x[...]`, take_along_axis, and
the functional updates `x.at[...].set(v)` / `.add(v)`.

Indices are drawn by hypothesis: ints, slices with any step (negative included), None,
Ellipsis, integer arrays (with repeats, negative entries, broadcasting), boolean masks.
Values are checked against NumPy's own indexing, pullbacks against finite differences at
first and second order; index arrays are fed both as constants and as run-time inputs.
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.errors import ShapeError
from stablegrad.ops import indexing as ix
from stablegrad.testing import check_grads

from .helpers import (
    BACKEND,
    assert_same,
    assert_zero_pullback,
    evaluate,
    pullback_examples,
    seeds,
    shapes,
    symbols,
    value_examples,
)

COVERED = {ix.Index, ix.IndexUpdate}


@st.composite
def basic_index_cases(draw):
    s = draw(shapes(max_dims=3))
    index = draw(hnp.basic_indices(s, allow_newaxis=True, allow_ellipsis=True))
    return s, index


@st.composite
def advanced_index_cases(draw):
    """Per axis: a full slice, a reversed slice, an int, or an integer array (arrays broadcast together)."""
    s = draw(shapes(min_dims=1, max_dims=3, min_side=1))
    rng = np.random.default_rng(draw(seeds))
    (array_shape,), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=1, max_dims=2, max_side=3))
    kinds = [draw(st.sampled_from(["slice", "reversed", "int", "array"])) for _ in s]
    if "array" not in kinds:
        kinds[draw(st.integers(0, len(s) - 1))] = "array"
    index = []
    for n, kind in zip(s, kinds):
        if kind == "slice":
            index.append(slice(None))
        elif kind == "reversed":
            index.append(slice(None, None, -1))
        elif kind == "int":
            index.append(int(rng.integers(-n, n)))
        else:
            index.append(rng.integers(-n, n, array_shape))  # repeats and negative entries
    return s, tuple(index)


@st.composite
def mask_index_cases(draw):
    """A boolean mask over some consecutive axes, slices or ints elsewhere."""
    s = draw(shapes(min_dims=1, max_dims=3))
    start = draw(st.integers(0, len(s) - 1))
    stop = draw(st.integers(start + 1, len(s)))
    rng = np.random.default_rng(draw(seeds))
    mask = rng.random(s[start:stop]) < 0.5
    before = [slice(None) if n == 0 or draw(st.booleans()) else int(rng.integers(0, n)) for n in s[:start]]
    return s, (*before, mask)


INDEX_CASES = {"basic": basic_index_cases(), "advanced": advanced_index_cases(), "mask": mask_index_cases()}


def _split(index):
    """(the index with arrays replaced by placeholders, the arrays) so arrays can be run-time inputs."""
    index = index if isinstance(index, tuple) else (index,)
    arrays = [e for e in index if isinstance(e, np.ndarray)]
    return index, arrays


def _rebuild(index, arrays):
    it = iter(arrays)
    return tuple(next(it) if isinstance(e, np.ndarray) else e for e in index)


@pytest.mark.parametrize("kind", list(INDEX_CASES))
@given(data=st.data())
@value_examples
def test_getitem_value(kind, data):
    s, index = data.draw(INDEX_CASES[kind])
    x = np.random.default_rng(data.draw(seeds)).standard_normal(s)
    symbolic = data.draw(st.booleans())
    expected = x[index]
    out, value = evaluate(lambda v: v[index], [x], symbolic)
    assert_same(out, value, expected, symbolic=symbolic or kind == "mask")
    # the same index with its arrays as run-time inputs
    index, arrays = _split(index)
    if kind == "mask" and BACKEND == "jax":  # XLA compiles static shapes: a mask given at run time cannot be
        with pytest.raises(ShapeError, match="boolean mask must be known when compiling"):
            evaluate(lambda v, *a: v[_rebuild(index, a)], [x, *arrays], symbolic)
        return
    out, value = evaluate(lambda v, *a: v[_rebuild(index, a)], [x, *arrays], symbolic)
    assert_same(out, value, expected, symbolic=True)


@pytest.mark.parametrize("kind", list(INDEX_CASES))
@given(data=st.data())
@pullback_examples
def test_getitem_pullback(kind, data):
    s, index = data.draw(INDEX_CASES[kind])
    x = np.random.default_rng(data.draw(seeds)).standard_normal(s)
    check_grads(lambda v: v[index], [x], order=2, symbolic_shapes=data.draw(st.booleans()))
    index, arrays = _split(index)
    if arrays:  # index arrays as graph inputs: they get a typed zero
        out = (lambda v, *a: v[_rebuild(index, a)])(*symbols([x, *arrays]))
        assert_zero_pullback_of_indices(out)


def assert_zero_pullback_of_indices(out):
    node = out.owner
    grads = node.op.pullback(node.inputs, node.outputs, [sg.ones_like(out)])
    assert all(isinstance(g, sg.graph.basic.Zero) for g in grads[1:])


def _value_shape(data, target: tuple) -> tuple:
    """A shape that broadcasts to `target`: leading axes dropped, some extents made 1."""
    shape = target[data.draw(st.integers(0, len(target))) :]
    return tuple(1 if data.draw(st.booleans()) else n for n in shape)


def _reference_update(x, index, v, mode):
    out = x.copy()
    if mode == "set":
        out[index] = v
    elif any(isinstance(e, np.ndarray) and e.dtype != np.bool_ for e in index):
        # repeated indices accumulate; v broadcast by hand, as NumPy 2.4's add.at misreads a 1-d v
        # against a multi-dimensional index
        np.add.at(out, index, np.broadcast_to(v, x[index].shape))
    else:
        out[index] += v
    return out


@pytest.mark.parametrize("mode", ["set", "add"])
@pytest.mark.parametrize("kind", list(INDEX_CASES))
@given(data=st.data())
@pullback_examples
def test_at_update(kind, mode, data):
    s, index = data.draw(INDEX_CASES[kind])
    index = index if isinstance(index, tuple) else (index,)
    rng = np.random.default_rng(data.draw(seeds))
    x = rng.standard_normal(s)
    v = rng.standard_normal(_value_shape(data, x[index].shape))
    symbolic = data.draw(st.booleans())

    def update(xv, vv):
        at = xv.at[index]
        return at.set(vv) if mode == "set" else at.add(vv)

    out, value = evaluate(update, [x, v], symbolic)
    assert_same(out, value, _reference_update(x, index, v, mode), symbolic)
    check_grads(update, [x, v], order=2, symbolic_shapes=symbolic)


def test_at_add_accumulates_repeated_indices():
    x = np.zeros(4)
    _, value = evaluate(lambda v: v.at[np.array([1, 1, 3, 1])].add(2.0), [x])
    np.testing.assert_array_equal(value, [0.0, 6.0, 0.0, 2.0])


def test_at_add_broadcasts_a_value_against_a_2d_index():
    """x.at[[[0, 1], [2, 1]]].add([1, 10]): each row of the index gets [1, 10]."""
    _, value = evaluate(lambda v: v.at[np.array([[0, 1], [2, 1]])].add(np.array([1.0, 10.0])), [np.zeros(3)])
    np.testing.assert_array_equal(value, [1.0, 20.0, 1.0])


def test_at_set_with_repeated_indices_gives_the_gradient_to_the_write_that_stays():
    """x.at[[1, 1, 3, 1]].set(v) keeps v[3] at 1 and v[2] at 3 (NumPy's last write): only
    those entries of v reach the output, and a broadcast scalar counts each position once."""
    x, v, s = sg.vector("x"), sg.vector("v"), sg.tensor("s")
    index = np.array([1, 1, 3, 1])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    by_vector, by_scalar = x.at[index].set(v), x.at[index].set(s)
    grads = sg.grad(sg.sum(by_vector * weights), [x, v]) + sg.grad(sg.sum(by_scalar * weights), [s])
    out, gx, gv, gs = sg.function([x, v, s], [by_vector, *grads])(np.zeros(4), np.array([10.0, 20, 30, 40]), 5.0)
    np.testing.assert_array_equal(out, [0.0, 40.0, 0.0, 30.0])
    np.testing.assert_array_equal(gx, [1.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(gv, [0.0, 0.0, 4.0, 2.0])
    assert gs == 2.0 + 4.0


def test_at_set_with_python_scalar_keeps_the_dtype():
    x = np.ones(3, np.float32)
    out, value = evaluate(lambda v: v.at[1].set(5), [x])
    assert out.dtype == np.float32 and value.dtype == np.float32
    np.testing.assert_array_equal(value, [1.0, 5.0, 1.0])


def test_gather_with_repeats_accumulates_in_the_gradient():
    x = np.arange(3.0)
    (v,) = symbols([x])
    g = sg.function([v], sg.grad(sg.sum(v[np.array([0, 2, 2, 2])]), v))(x)
    np.testing.assert_array_equal(g, [1.0, 0.0, 3.0])


@st.composite
def take_along_axis_cases(draw):
    s = draw(shapes(min_dims=1, max_dims=3))
    axis = draw(st.integers(-len(s), len(s) - 1))
    a = axis % len(s)
    rng = np.random.default_rng(draw(seeds))
    index_shape = tuple(
        draw(st.integers(0, 3)) if d == a else (1 if draw(st.booleans()) else n) for d, n in enumerate(s)
    )
    n = s[a]
    indices = rng.integers(-n, n, index_shape) if n else np.zeros(index_shape, np.int64)
    if n == 0 and np.prod(index_shape):
        indices = np.zeros(tuple(0 if d == a else m for d, m in enumerate(index_shape)), np.int64)
    return rng.standard_normal(s), indices, axis


@given(case=take_along_axis_cases(), symbolic=st.booleans())
@pullback_examples
def test_take_along_axis(case, symbolic):
    x, indices, axis = case
    expected = np.take_along_axis(x, indices, axis=axis)
    out, value = evaluate(lambda v, i: sg.take_along_axis(v, i, axis), [x, indices], symbolic)
    assert_same(out, value, expected, symbolic=True)
    check_grads(lambda v: sg.take_along_axis(v, indices, axis), [x], order=2, symbolic_shapes=symbolic)


def test_take_along_axis_of_argmax_is_max():
    x = np.random.default_rng(0).standard_normal((3, 4))
    _, value = evaluate(lambda v: sg.take_along_axis(v, sg.argmax(v, axis=1, keepdims=True), 1), [x])
    np.testing.assert_array_equal(value, x.max(axis=1, keepdims=True))
    assert_zero_pullback(sg.argmax(symbols([x])[0], axis=1))


def test_gradients_of_many_indexings_hold_no_array_sized_constants():
    """Each x[t] pulls back from zeros x's size: T of them as constants held T²·K numbers."""
    from stablegrad.graph.basic import Constant, ancestors
    from stablegrad.ops.creation import LARGEST_CONSTANT

    x = sg.tensor("x", shape=(200, 50))  # 10⁴ entries, past LARGEST_CONSTANT
    cost = sg.sum(sg.stack([sg.sum(x[t] ** 2) for t in range(200)]))
    g = sg.grad(cost, x)
    big = [v for v in ancestors([g]) if isinstance(v, Constant) and v.data.size > LARGEST_CONSTANT]
    assert big == []
    values = np.arange(10_000.0).reshape(200, 50)
    np.testing.assert_array_equal(sg.function([x], g)(values), 2 * values)


def test_gradients_of_many_indexings_are_accumulated_at_their_index():
    """T indexings of a (T, K) array: one buffer updated T times, not T full-size sums."""
    T = 50
    x = sg.tensor("x", shape=(T, 4))
    cost = sg.sum(x**3) + sg.sum(sg.stack([sg.sum(x[t] * x[(t + 1) % T]) for t in range(T)]))
    g = sg.grad(cost, x)
    f = sg.function([x], g)
    full_size_sums = [n for n in f.nodes if type(n.op).__name__ == "Add" and n.outputs[0].type.shape == (T, 4)]
    assert len(full_size_sums) <= 1  # (the x**3 term joins once)
    values = np.random.default_rng(0).normal(size=(T, 4))
    expected = 3 * values**2 + np.roll(values, 1, axis=0) + np.roll(values, -1, axis=0)
    np.testing.assert_allclose(f(values), expected, rtol=1e-14, atol=1e-14)  # (three O(1) terms)


def test_an_index_update_writes_in_place_only_into_a_buffer_nothing_else_reads():
    z = sg.zeros((3,))
    a = z.at[0].add(1.0)
    b = a.at[1].add(2.0)
    c = z.at[2].add(5.0)  # z read twice: neither update may write into it
    d = b.at[2].add(3.0)  # b is read once, by this update: written in place
    a_, b_, c_, d_ = sg.function([], [a, b, c, d])()
    np.testing.assert_array_equal(a_, [1.0, 0.0, 0.0])  # a is an output: b copies it
    np.testing.assert_array_equal(b_, [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(c_, [0.0, 0.0, 5.0])
    np.testing.assert_array_equal(d_, [1.0, 2.0, 3.0])
