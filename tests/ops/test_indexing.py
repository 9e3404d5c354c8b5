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
    distinct,
    evaluate,
    pullback_examples,
    seeds,
    shapes,
    symbols,
    value_examples,
)

COVERED = {ix.Index, ix.IndexUpdate, ix.Argsort}


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


# -- sort, argsort, take, one_hot, diag, repeat: against NumPy on hypothesis inputs ------------------------
def _distinct(rng, shape):
    """Pairwise distinct entries (no ties), or an empty array."""
    return distinct(rng, shape) if np.prod(shape) else np.zeros(shape)


def _ties(rng, shape):
    """Few distinct values: ties everywhere, which a stable order keeps in place."""
    return rng.integers(-2, 2, shape, endpoint=True).astype(np.float64)


@st.composite
def sort_cases(draw):
    s = draw(shapes(max_dims=3))
    axis = draw(st.one_of(st.none(), st.integers(-len(s), len(s) - 1))) if s else None
    x = (_ties if draw(st.booleans()) else _distinct)(np.random.default_rng(draw(seeds)), s)
    return x, axis


@given(case=sort_cases(), symbolic=st.booleans())
@value_examples
def test_sort_and_argsort_values(case, symbolic):
    x, axis = case
    for values in (x, x.astype(np.float32), x.astype(np.int32)):
        out, value = evaluate(lambda v: sg.sort(v, axis=axis), [values], symbolic)
        assert_same(out, value, np.sort(values, axis=axis), symbolic)
        # argsort is stable: at ties the order NumPy's stable sort gives
        out, value = evaluate(lambda v: sg.argsort(v, axis=axis), [values], symbolic)
        assert_same(out, value, np.argsort(values, axis=axis, kind="stable").astype(np.int64), symbolic)
        assert_zero_pullback(out)


@given(case=sort_cases(), symbolic=st.booleans())
@pullback_examples
def test_sort_pullback(case, symbolic):
    x, axis = case
    x = _distinct(np.random.default_rng(0), x.shape)  # sort is smooth only where no two entries tie
    check_grads(lambda v: sg.sort(v, axis=axis), [x], order=2, symbolic_shapes=symbolic)


def test_sort_puts_nans_last():
    x = np.array([2.0, np.nan, -1.0, np.inf, np.nan, 0.5])
    _, value = evaluate(lambda v: sg.sort(v), [x])
    np.testing.assert_array_equal(value, np.sort(x))
    _, value = evaluate(lambda v: sg.argsort(v), [x])
    np.testing.assert_array_equal(value, np.argsort(x, kind="stable"))


@st.composite
def take_cases(draw):
    s = draw(shapes(max_dims=3))
    axis = draw(st.one_of(st.none(), st.integers(-len(s), len(s) - 1))) if s else None
    n = int(np.prod(s)) if axis is None else s[axis]
    rng = np.random.default_rng(draw(seeds))
    index_shape = draw(st.sampled_from([(), (3,), (2, 2)])) if n else (0,)
    indices = rng.integers(-n, n, index_shape) if n else np.zeros((0,), np.int64)
    if not index_shape and draw(st.booleans()):
        indices = int(indices)  # a Python int drops the axis, as an integer index does
    return rng.standard_normal(s), indices, axis


@given(case=take_cases(), symbolic=st.booleans())
@pullback_examples
def test_take(case, symbolic):
    x, indices, axis = case
    out, value = evaluate(lambda v: sg.take(v, indices, axis=axis), [x], symbolic)
    assert_same(out, value, np.take(x, indices, axis=axis), symbolic)
    if isinstance(indices, np.ndarray):  # indices given at run time
        out, value = evaluate(lambda v, i: sg.take(v, i, axis=axis), [x, indices], symbolic)
        assert_same(out, value, np.take(x, indices, axis=axis), symbolic=True)
    check_grads(lambda v: sg.take(v, indices, axis=axis), [x], order=2, symbolic_shapes=symbolic)


@given(case=take_cases(), mode=st.sampled_from(["wrap", "clip"]), spread=st.integers(1, 3), symbolic=st.booleans())
@pullback_examples
def test_take_wraps_or_clips_indices_out_of_range(case, mode, spread, symbolic):
    x, indices, axis = case
    n = x.size if axis is None else x.shape[axis]
    indices = np.asarray(indices) * spread + (n if mode == "clip" else 0)  # past the ends, both sides
    if n == 0:
        return  # (nothing to wrap or clip into: NumPy raises, as "raise" does)
    expected = np.take(x, indices, axis=axis, mode=mode)
    out, value = evaluate(lambda v: sg.take(v, indices, axis=axis, mode=mode), [x], symbolic)
    assert_same(out, value, expected, symbolic)
    out, value = evaluate(lambda v, i: sg.take(v, i, axis=axis, mode=mode), [x, indices], symbolic)
    assert_same(out, value, expected, symbolic=True)
    check_grads(lambda v: sg.take(v, indices, axis=axis, mode=mode), [x], order=1, symbolic_shapes=symbolic)


def test_take_refuses_an_unknown_mode():
    with pytest.raises(sg.ShapeError, match="take: mode must be 'raise', 'wrap' or 'clip', got 'nearest'"):
        sg.take(sg.vector("x"), [0], mode="nearest")


@given(
    shape=shapes(max_dims=2),
    num_classes=st.integers(0, 4),
    dtype=st.sampled_from(["float64", "float32", "int32", "bool"]),
    seed=seeds,
    symbolic=st.booleans(),
    data=st.data(),
)
@value_examples
def test_one_hot(shape, num_classes, dtype, seed, symbolic, data):
    """Against NumPy's spelling of jax.nn.one_hot: labels outside [0, num_classes) give zero rows."""
    labels = np.random.default_rng(seed).integers(-1, num_classes + 1, shape)
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    expected = np.moveaxis((labels[..., None] == np.arange(num_classes)).astype(dtype), -1, axis)
    out, value = evaluate(lambda v: sg.one_hot(v, num_classes, dtype=dtype, axis=axis), [labels], symbolic)
    assert_same(out, value, expected, symbolic)


def test_one_hot_agrees_with_jax():
    jax_nn = pytest.importorskip("jax.nn")
    labels = np.array([[0, 3, -1], [2, 1, 5]])
    for axis in (-1, 0, 1):
        expected = np.asarray(jax_nn.one_hot(labels, 4, dtype=np.float32, axis=axis))
        _, value = evaluate(lambda v, axis=axis: sg.one_hot(v, 4, dtype="float32", axis=axis), [labels])
        np.testing.assert_array_equal(value, expected)


@st.composite
def diag_cases(draw):
    s = draw(st.one_of(shapes(min_dims=1, max_dims=1, max_side=4), shapes(min_dims=2, max_dims=2, max_side=4)))
    k = draw(st.integers(-5, 5))
    return np.random.default_rng(draw(seeds)).standard_normal(s), k


@given(case=diag_cases(), symbolic=st.booleans())
@pullback_examples
def test_diag(case, symbolic):
    x, k = case
    out, value = evaluate(lambda v: sg.diag(v, k), [x], symbolic)
    assert_same(out, value, np.diag(x, k), symbolic)
    check_grads(lambda v: sg.diag(v, k), [x], order=2, symbolic_shapes=symbolic)


@st.composite
def repeat_cases(draw):
    s = draw(shapes(max_dims=3))
    axis = draw(st.one_of(st.none(), st.integers(-len(s), len(s) - 1))) if s else None
    n = int(np.prod(s)) if axis is None else s[axis]
    repeats = draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return np.random.default_rng(draw(seeds)).standard_normal(s), repeats, axis


@given(case=repeat_cases(), symbolic=st.booleans())
@pullback_examples
def test_repeat(case, symbolic):
    x, repeats, axis = case
    symbolic = symbolic and isinstance(repeats, int)  # one count per entry needs the extent statically
    for values in (x, x.astype(np.float32), (x > 0).astype(np.int32)):
        out, value = evaluate(lambda v: sg.repeat(v, repeats, axis=axis), [values], symbolic)
        assert_same(out, value, np.repeat(values, repeats, axis=axis), symbolic)
    check_grads(lambda v: sg.repeat(v, repeats, axis=axis), [x], order=2, symbolic_shapes=symbolic)


@st.composite
def copying_pad_cases(draw):
    """The modes that copy entries of x (constant padding is a case of tests/ops/test_shape.py),
    pad widths past the extent included (reflections of reflections)."""
    s = draw(shapes(max_dims=3, min_side=1))
    pair = st.tuples(st.integers(0, 4), st.integers(0, 4))
    width = draw(st.one_of(st.integers(0, 4), pair, st.lists(pair, min_size=len(s), max_size=len(s)).map(tuple)))
    if not s:
        width = draw(st.integers(0, 4))  # NumPy takes no pairs for a 0-d array: () is not of integral type
    mode = draw(st.sampled_from(["edge", "reflect", "symmetric", "wrap"]))
    return np.random.default_rng(draw(seeds)).standard_normal(s), width, mode


@given(case=copying_pad_cases())
@pullback_examples
def test_pad_copying_modes(case):
    x, width, mode = case
    for values in (x, x.astype(np.float32), (x > 0).astype(np.int32)):
        out, value = evaluate(lambda v: sg.pad(v, width, mode=mode), [values])
        assert_same(out, value, np.pad(values, width, mode=mode), symbolic=False)
    check_grads(lambda v: sg.pad(v, width, mode=mode), [x], order=2)


@st.composite
def computing_pad_cases(draw):
    """The modes that compute their padding: a ramp to `end_values`, or a statistic of the
    first or last `stat_length` entries (None, a scalar, pairs; lengths past the extent included)."""
    s = draw(shapes(min_dims=1, max_dims=3, min_side=1))
    pair = st.tuples(st.integers(0, 3), st.integers(0, 3))
    width = draw(st.one_of(st.integers(0, 3), pair, st.lists(pair, min_size=len(s), max_size=len(s)).map(tuple)))
    mode = draw(st.sampled_from(["linear_ramp", "maximum", "minimum", "mean", "median"]))
    if mode == "linear_ramp":
        ends = st.floats(-5, 5, allow_nan=False).map(lambda v: round(v, 2))
        kwargs = {"end_values": draw(st.one_of(ends, st.tuples(ends, ends)))}
    else:
        low = 1 if mode in ("maximum", "minimum") else 0
        lengths = st.integers(low, 5)
        kwargs = {"stat_length": draw(st.one_of(st.none(), lengths, st.tuples(lengths, lengths)))}
        if kwargs["stat_length"] == 0 or (isinstance(kwargs["stat_length"], tuple) and 0 in kwargs["stat_length"]):
            kwargs["stat_length"] = None  # (no entries: NumPy's mean of nothing warns; a test of its own below)
    x = distinct(np.random.default_rng(draw(seeds)), s)  # no ties: max, min and median have a gradient
    return x, width, mode, kwargs


@given(case=computing_pad_cases())
@pullback_examples
def test_pad_computing_modes(case):
    x, width, mode, kwargs = case
    for values in (x, x.astype(np.float32), np.round(x * 3).astype(np.int32)):
        out, value = evaluate(lambda v: sg.pad(v, width, mode=mode, **kwargs), [values])
        expected = np.pad(values, width, mode=mode, **kwargs)
        # (a ramp to an ulp or two of its ends: where any step is 0, NumPy's linspace takes k/w·Δ instead of
        # k·(Δ/w) for all, and an entry near 0 between ends of opposite signs keeps only the ends' absolute error)
        eps = np.finfo(np.float64 if values.dtype == np.int32 else values.dtype).eps
        scale = max(np.abs(expected).max(initial=0.0), 1.0) if mode == "linear_ramp" else 0.0
        rtol = 1e-15 if values.dtype == np.float64 else 4e-7
        assert_same(out, value, expected, symbolic=False, rtol=rtol, atol=4 * eps * scale)
    check_grads(lambda v: sg.pad(v, width, mode=mode, **kwargs), [x], order=2)


def test_pad_linear_ramp_with_unknown_extents():
    x = np.arange(6.0).reshape(2, 3)
    m = sg.matrix("m")
    out = sg.pad(m, ((1, 2), (3, 0)), mode="linear_ramp", end_values=((-1.0, 2.0), (0.5, 0.0)))
    expected = np.pad(x, ((1, 2), (3, 0)), mode="linear_ramp", end_values=((-1.0, 2.0), (0.5, 0.0)))
    np.testing.assert_allclose(sg.function([m], out)(x), expected, rtol=5e-16)


def test_pad_mean_of_no_entries_is_nan_as_numpy():
    x = np.array([1.0, 2.0])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        expected = np.pad(x, 1, mode="mean", stat_length=0)
    got = sg.pad(sg.constant(x), 1, mode="mean", stat_length=0).eval()
    np.testing.assert_array_equal(got, expected)  # [nan, 1, 2, nan]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda v: sg.pad(v, 1, mode="maximum", stat_length=0), "pad: stat_length of 0 yields no value"),
        (lambda v: sg.pad(v, 1, mode="mean", stat_length=-1), "pad: stat_length must be non-negative"),
        (lambda v: sg.pad(v, 1, mode="mean", stat_length="a"), "pad: stat_length must be None or non-negative"),
        (lambda v: sg.pad(v, 1, mode="edge", constant_values=3), "unsupported keyword arguments for mode 'edge'"),
        (lambda v: sg.pad(v, 1, end_values=3), "unsupported keyword arguments for mode 'constant': end_values"),
        (lambda v: sg.pad(v, 1, mode="median"), "pad: mode 'median' needs the extent of axis 0 known statically"),
        (lambda v: sg.pad(sg.tensor("e", (0,)), 1, mode="linear_ramp"), "pad: can't extend empty axis 0"),
    ],
)
def test_pad_computing_modes_misuse(call, match):
    with pytest.raises(ShapeError, match=match) as info:
        call(sg.vector("v"))
    assert info.value.location[0] == __file__


def test_pad_copying_modes_need_static_extents_and_entries():
    with pytest.raises(ShapeError, match="pad: mode 'edge' needs the extent of axis 0 known statically") as info:
        sg.pad(sg.vector("v"), 1, mode="edge")
    assert info.value.location[0] == __file__
    with pytest.raises(ShapeError, match="pad: can't extend empty axis 1"):
        sg.pad(sg.tensor("x", shape=(2, 0)), 1, mode="wrap")
    assert sg.pad(sg.vector("v"), 0, mode="edge").owner is None  # nothing to pad: v itself


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda x: sg.sort(x, axis=2), "sort: axis 2 is out of range"),
        (lambda x: sg.argsort(x, axis=-3), "argsort: axis -3 is out of range"),
        (lambda x: sg.take(x, [0], axis=2), "take: axis 2 is out of range"),
        (lambda x: sg.take(x, [0.5]), "take: indices must be integers"),
        (lambda x: sg.one_hot(x, 3), "one_hot: labels must be integers"),
        (lambda x: sg.diag(sg.reshape(x, (1, 2, 3)), 0), "diag: input must be 1-d or 2-d"),
        (lambda x: sg.repeat(x, 2, axis=3), "repeat: axis 3 is out of range"),
        (lambda x: sg.repeat(x, [1, 2, 3], axis=0), "repeat: 3 repeats for axis 0 of extent 2"),
        (lambda x: sg.repeat(x, -1), "repeat: repeats must be non-negative"),
    ],
)
def test_indexing_misuse_names_the_op_and_the_line(fn, match):
    with pytest.raises(ShapeError, match=match) as info:
        fn(sg.tensor("x", shape=(2, 3)))
    assert info.value.location[0] == __file__
