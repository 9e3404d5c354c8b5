"""Shape ops (stablegrad.ops.shape): reshape, transpose, expand_dims, squeeze, broadcast_to,
concatenate, stack, moveaxis, swapaxes, and symbolic extents.

Each case strategy draws shapes (size-0 and size-1 extents included) and the op's
parameters, and yields `(fn, ref, arrays)`; every case is checked against NumPy for
value and shape, with static and with unknown extents, and for its pullback against
finite differences at first and second order.
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import shape as sh
from stablegrad.testing import check_grads

from .helpers import assert_same, evaluate, numpy_value, pullback_examples, seeds, shapes, value_examples

COVERED = {
    sh.ShapeDim,
    sh.Reshape,
    sh.Transpose,
    sh.ExpandDims,
    sh.Squeeze,
    sh.BroadcastTo,
    sh.ReduceTo,
    sh.Concatenate,
    sh.SplitLike,
}


def _arrays(draw, *shape_list):
    rng = np.random.default_rng(draw(seeds))
    return [rng.standard_normal(s) for s in shape_list]


@st.composite
def reshape_cases(draw):
    s = draw(shapes(max_dims=4))
    size = math.prod(s)
    targets = [(-1,), (size,), tuple(reversed(s)), (1, *s), (*s, 1)]
    if s and s[0] > 0:
        targets.append((s[0], -1))
    if size:
        targets.append((-1, *s[1:]) if s else (-1,))
    target = draw(st.sampled_from(targets))
    method = draw(st.booleans())
    fn = (lambda x: x.reshape(*target)) if method else (lambda x: sg.reshape(x, target))
    return fn, lambda x: np.reshape(x, target), _arrays(draw, s)


@st.composite
def reshape_symbolic_target_cases(draw):
    """A target built from the operand's own (possibly symbolic) extents."""
    s = draw(shapes(min_dims=2, max_dims=3, min_side=1))
    return (
        lambda x: sg.reshape(x, (x.shape[0], -1)),
        lambda x: np.reshape(x, (x.shape[0], -1)),
        _arrays(draw, s),
    )


@st.composite
def ravel_cases(draw):
    return sg.ravel, np.ravel, _arrays(draw, draw(shapes()))


@st.composite
def ravel_method_cases(draw):
    """x.ravel(), x.flatten() and sg.flatten: all NumPy's C-order flattening."""
    form = draw(st.sampled_from(["ravel", "flatten", "sg.flatten"]))
    fn = {"ravel": lambda x: x.ravel(), "flatten": lambda x: x.flatten(), "sg.flatten": sg.flatten}[form]
    return fn, lambda x: x.flatten(), _arrays(draw, draw(shapes(max_dims=4)))


@st.composite
def tile_cases(draw):
    """reps an int or a tuple shorter than, as long as, or longer than x's rank (0 included)."""
    s = draw(shapes())
    reps = draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4).map(tuple)))
    return (lambda x: sg.tile(x, reps)), (lambda x: np.tile(x, reps)), _arrays(draw, s)


@st.composite
def pad_cases(draw):
    """pad_width and constant_values in each of NumPy's forms: scalar, (before, after), one pair per axis."""
    s = draw(shapes(max_dims=3))
    pair = st.tuples(st.integers(0, 2), st.integers(0, 2))
    width = draw(
        st.one_of(
            st.integers(0, 2),
            st.tuples(st.integers(0, 2)),
            pair,
            st.lists(pair, min_size=len(s), max_size=len(s)).map(tuple),
        )
    )
    value_pair = st.tuples(st.sampled_from([0.0, 1.5]), st.sampled_from([-2.0, 3.25]))
    values = draw(
        st.one_of(
            st.sampled_from([0, 0.5, -3]), value_pair, st.lists(value_pair, min_size=len(s), max_size=len(s)).map(tuple)
        )
    )
    if len(s) == 0:
        width, values = draw(st.integers(0, 2)), 0  # NumPy pads a 0-d array into a 0-d array
    return (
        lambda x: sg.pad(x, width, constant_values=values),
        lambda x: np.pad(x, width, constant_values=values),
        _arrays(draw, s),
    )


@st.composite
def transpose_cases(draw):
    s = draw(shapes(max_dims=4))
    form = draw(st.sampled_from(["none", "perm", "negative", "T", "method"]))
    perm = draw(st.permutations(range(len(s))))
    if form == "none":
        return sg.transpose, np.transpose, _arrays(draw, s)
    if form == "T":
        return (lambda x: x.T), (lambda x: x.T), _arrays(draw, s)
    if form == "method":
        return (lambda x: x.transpose(*perm)), (lambda x: x.transpose(*perm)), _arrays(draw, s)
    axes = [a - len(s) for a in perm] if form == "negative" else perm
    return (lambda x: sg.transpose(x, axes)), (lambda x: np.transpose(x, axes)), _arrays(draw, s)


@st.composite
def expand_dims_cases(draw):
    s = draw(shapes())
    if draw(st.booleans()):
        axis = draw(st.integers(-len(s) - 1, len(s)))
    else:
        n = draw(st.integers(1, 2))
        axis = tuple(draw(st.permutations(range(len(s) + n)))[:n])
    return (lambda x: sg.expand_dims(x, axis)), (lambda x: np.expand_dims(x, axis)), _arrays(draw, s)


@st.composite
def squeeze_cases(draw):
    """Explicit axes (static or symbolic extents); axis=None squeezes the statically known 1s."""
    s = draw(shapes(max_side=2))
    ones = [i for i, n in enumerate(s) if n == 1]
    axes = tuple(draw(st.permutations(ones))[: draw(st.integers(0, len(ones)))])
    axis = draw(st.sampled_from([axes, *(a - len(s) for a in axes)])) if len(axes) == 1 else axes
    return (lambda x: sg.squeeze(x, axis)), (lambda x: np.squeeze(x, axis)), _arrays(draw, s)


@st.composite
def broadcast_to_cases(draw):
    shape_in, target = draw(hnp.mutually_broadcastable_shapes(num_shapes=1, max_dims=3, max_side=3))
    (s,) = shape_in
    return (lambda x: sg.broadcast_to(x, target)), (lambda x: np.broadcast_to(x, target)), _arrays(draw, s)


@st.composite
def broadcast_to_symbolic_cases(draw):
    """Target extents taken from another tensor's (possibly unknown) shape."""
    (s, t), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    result = np.broadcast_shapes(s, t)
    return (
        lambda x, y: sg.broadcast_to(x, (x + y).shape),
        lambda x, y: np.broadcast_to(x, result) + 0 * y.sum(),
        _arrays(draw, s, t),
    )


@st.composite
def broadcast_arrays_cases(draw):
    (s, t), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    which = draw(st.integers(0, 1))
    return (
        lambda x, y: sg.broadcast_arrays(x, y)[which],
        lambda x, y: np.broadcast_arrays(x, y)[which],
        _arrays(draw, s, t),
    )


@st.composite
def concatenate_cases(draw):
    s = draw(shapes(min_dims=1))
    axis = draw(st.integers(-len(s), len(s) - 1))
    k = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    parts = [tuple(n if i != axis % len(s) else m for i, n in enumerate(s)) for m in lengths]
    return (
        lambda *xs: sg.concatenate(xs, axis=axis),
        lambda *xs: np.concatenate(xs, axis=axis),
        _arrays(draw, *parts),
    )


@st.composite
def stack_cases(draw):
    s = draw(shapes())
    axis = draw(st.integers(-len(s) - 1, len(s)))
    k = draw(st.integers(1, 3))
    return (lambda *xs: sg.stack(xs, axis=axis)), (lambda *xs: np.stack(xs, axis=axis)), _arrays(draw, *[s] * k)


@st.composite
def moveaxis_cases(draw):
    s = draw(shapes(min_dims=1, max_dims=4))
    n = draw(st.integers(1, len(s)))
    src = draw(st.permutations(range(len(s))))[:n]
    dst = draw(st.permutations(range(-len(s), 0)))[:n]
    if n == 1 and draw(st.booleans()):
        src, dst = src[0], dst[0]
    return (lambda x: sg.moveaxis(x, src, dst)), (lambda x: np.moveaxis(x, src, dst)), _arrays(draw, s)


@st.composite
def swapaxes_cases(draw):
    s = draw(shapes(min_dims=1, max_dims=4))
    a, b = (draw(st.integers(-len(s), len(s) - 1)) for _ in range(2))
    return (lambda x: sg.swapaxes(x, a, b)), (lambda x: np.swapaxes(x, a, b)), _arrays(draw, s)


@st.composite
def swapaxes_method_cases(draw):
    s = draw(shapes(min_dims=1, max_dims=4))
    a, b = (draw(st.integers(-len(s), len(s) - 1)) for _ in range(2))
    return (lambda x: x.swapaxes(a, b)), (lambda x: x.swapaxes(a, b)), _arrays(draw, s)


@st.composite
def atleast_1d_cases(draw):
    return sg.atleast_1d, np.atleast_1d, _arrays(draw, draw(shapes(max_dims=2)))


@st.composite
def shape_entry_cases(draw):
    """x.shape[i] (a symbolic int64 scalar when unknown) and x.size used in arithmetic."""
    s = draw(shapes(min_dims=1))
    i = draw(st.integers(0, len(s) - 1))
    # NumPy's extents are Python ints, so weak: float32 stays float32 with static or unknown extents
    return (lambda x: x * x.shape[i] + x.size), (lambda x: x * x.shape[i] + x.size), _arrays(draw, s)


@st.composite
def reduce_to_cases(draw):
    """ReduceTo, the adjoint of broadcasting, used directly."""
    shape_in, target = draw(hnp.mutually_broadcastable_shapes(num_shapes=1, max_dims=3, max_side=3))
    (s,) = shape_in
    extra = len(target) - len(s)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(s) if n == 1 and target[extra + i] != 1)
    return (
        lambda g: sh.reduce_to(g, s),
        lambda g: np.sum(g, axis=axes, keepdims=True).reshape(s),
        _arrays(draw, target),
    )


CASES = {
    "reshape": reshape_cases(),
    "reshape_symbolic_target": reshape_symbolic_target_cases(),
    "ravel": ravel_cases(),
    "transpose": transpose_cases(),
    "expand_dims": expand_dims_cases(),
    "squeeze": squeeze_cases(),
    "broadcast_to": broadcast_to_cases(),
    "broadcast_to_symbolic": broadcast_to_symbolic_cases(),
    "broadcast_arrays": broadcast_arrays_cases(),
    "concatenate": concatenate_cases(),
    "stack": stack_cases(),
    "moveaxis": moveaxis_cases(),
    "swapaxes": swapaxes_cases(),
    "swapaxes_method": swapaxes_method_cases(),
    "ravel_method": ravel_method_cases(),
    "tile": tile_cases(),
    "pad": pad_cases(),
    "atleast_1d": atleast_1d_cases(),
    "shape_entry": shape_entry_cases(),
    "reduce_to": reduce_to_cases(),
}


@pytest.mark.parametrize("name", list(CASES))
@given(data=st.data())
@value_examples
def test_shape_op_value(name, data):
    fn, ref, arrays = data.draw(CASES[name])
    symbolic = data.draw(st.booleans())
    out, value = evaluate(fn, arrays, symbolic)
    assert_same(out, value, numpy_value(ref, arrays), symbolic)
    float32 = [a.astype(np.float32) for a in arrays]
    out32, value32 = evaluate(fn, float32, symbolic)
    assert_same(out32, value32, numpy_value(ref, float32), symbolic)


@pytest.mark.parametrize("name", list(CASES))
@given(data=st.data())
@pullback_examples
def test_shape_op_pullback(name, data):
    fn, _, arrays = data.draw(CASES[name])
    check_grads(fn, arrays, order=2, symbolic_shapes=data.draw(st.booleans()))


def test_squeeze_without_axis_drops_every_static_unit_extent():
    x = np.arange(6.0).reshape(1, 3, 1, 2)
    out, value = evaluate(sg.squeeze, [x])
    assert_same(out, value, np.squeeze(x), symbolic=False)
    check_grads(sg.squeeze, [x], order=2)


def test_shape_is_static_where_known_and_symbolic_elsewhere():
    x = sg.tensor("x", shape=(None, 3))
    n, m = x.shape
    assert m == 3
    assert isinstance(n, sg.Variable) and n.dtype == np.int64 and n.ndim == 0
    assert isinstance(n.owner.op, sh.ShapeDim)
    assert sg.function([x], n)(np.zeros((5, 3))) == 5


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda x: sg.swapaxes(x, 0, 2), "swapaxes: axis2 2 is out of range"),
        (lambda x: x.swapaxes(-3, 0), "swapaxes: axis1 -3 is out of range"),
        (lambda x: sg.tile(x, (2, -1)), "tile: reps must be non-negative"),
        (lambda x: sg.pad(x, ((1, 2), (3, 4), (5, 6))), r"pad: pad_width .* cannot be broadcast to \(2, 2\)"),
        (lambda x: sg.pad(x, -1), "pad: pad_width must be non-negative"),
        (lambda x: sg.pad(x, 1, mode="empty"), "pad: mode 'empty' is not supported"),
    ],
)
def test_shape_misuse_names_the_op_and_the_line(fn, match):
    with pytest.raises(sg.ShapeError, match=match) as info:
        fn(sg.matrix("x"))
    assert info.value.location[0] == __file__
