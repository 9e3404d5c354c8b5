"""The NumPy backend's whole-op implementations are bit-for-bit their ops' inlined bodies, and its
paired row ops (`row_pairs`) the separate nodes they replace."""

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.backends import numpy_fused
from stablegrad.backends.numpy_program import Program, runs_whole
from stablegrad.backends.row_pairs import LogSumExpAndScaledSoftmax, ScaledSoftmax
from stablegrad.ops.stable import LogSumExp, Softmax
from stablegrad.ops.stable.logsumexp import LogSumExpGrad
from stablegrad.rewrite.pipeline import optimize

SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 800.0, -800.0]


def _both(build, dtype, ndim):
    """(fused, inlined) compiled versions of build(x)."""
    x = sg.tensor("x", shape=(None,) * ndim, dtype=dtype)
    y = build(x)
    fused = sg.function([x], y)
    inlined = sg.function([x], y)
    inlined._program = type(fused._program)([x], optimize([y], [x], keep_whole=None))
    return fused, inlined


CASES = {
    "logsumexp_last": lambda x: sg.logsumexp(x, axis=-1),
    "logsumexp_all_keepdims": lambda x: sg.logsumexp(x, axis=None, keepdims=True),
    "logsumexp_first": lambda x: sg.logsumexp(x, axis=0),
    "softmax_last": lambda x: sg.softmax(x, axis=-1),
    "softmax_both": lambda x: sg.softmax(x, axis=(0, 1)),
    "logsumexp_grad": lambda x: sg.grad(sg.sum(sg.logsumexp(x, axis=1) * 1.5), x),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@given(data=st.data())
def test_fused_equals_inlined_bit_for_bit(name, dtype, data):
    huge = float(np.finfo(dtype).max) / 2
    values = st.one_of(st.floats(-1e3, 1e3, width=32), st.sampled_from([*SPECIAL, huge, -huge]))
    array = data.draw(
        hnp.arrays(dtype, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4), elements=values)
    )
    fused, inlined = _both(CASES[name], dtype, 2)
    np.testing.assert_array_equal(fused(array), inlined(array))


def test_the_numpy_backend_keeps_plain_logsumexp_and_softmax_whole_and_inlines_the_rest():
    x = sg.matrix("x")
    f = sg.function([x], [sg.logsumexp(x, axis=1), sg.softmax(x), sg.logsumexp(x, axis=1, b=x)])
    kept = [type(n.op) for n in f.nodes if isinstance(n.op, LogSumExp | Softmax)]
    assert kept == [LogSumExp, Softmax]  # the weighted one is inlined: no fused version covers it
    assert runs_whole(LogSumExp((1,))) and not runs_whole(LogSumExp((1,), weighted=True))


# The row path (large C-ordered arrays reduced over their last axis: blocks of rows, exp into a
# reused buffer, non-finite rows redone) with its sizes shrunk, so that small drawn arrays
# cross block boundaries, take both ways of finding the max and mix rows with and without ties.
ROW_CASES = {
    "logsumexp_last": lambda x: sg.logsumexp(x, axis=-1),
    "logsumexp_last_keepdims": lambda x: sg.logsumexp(x, axis=-1, keepdims=True),
    "logsumexp_grad": lambda x: sg.grad(sg.sum(sg.logsumexp(x, axis=-1) * 1.5), x),
}


@pytest.mark.parametrize("name", ROW_CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@settings(max_examples=60)
@given(data=st.data())
def test_row_path_equals_inlined_bit_for_bit(name, dtype, data):
    huge = float(np.finfo(dtype).max) / 2
    values = st.one_of(st.floats(-1e3, 1e3, width=32), st.sampled_from([*SPECIAL, huge, -huge]))
    ndim = data.draw(st.integers(1, 3))
    shape = hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1, max_side=6)
    array = data.draw(hnp.arrays(dtype, shape, elements=values))
    sizes = {
        "_ROW_PATH_MIN": 0,
        "_BLOCK": data.draw(st.integers(1, 40)),
        "_SHORT_ROW": data.draw(st.sampled_from([0, 3, 99])),
    }
    fused, inlined = _both(ROW_CASES[name], dtype, ndim)
    with mock.patch.multiple(numpy_fused, **sizes):
        assert numpy_fused._by_rows(array, (ndim - 1,))
        result = fused(array)
    if name == "logsumexp_grad":  # (scaled by 1.5 on the row path: p · (1.5 / total))
        _assert_within_2_ulps([result], [inlined(array)])
    else:
        np.testing.assert_array_equal(result, inlined(array))
    assert np.shape(result) == np.shape(inlined(array))


def _special_rows(dtype, shape):
    """A random array with rows (over the last axis) that exercise each special case."""
    x = (3 * np.random.default_rng(7).standard_normal(shape)).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    rows[1] = -np.inf  # nothing: lse -inf, gradient 0
    rows[2, [3, 9]] = np.inf  # two +inf entries: lse +inf, gradient 1/2 at each
    rows[3, 4] = np.nan  # NaN propagates
    rows[4, [0, 5, 8]] = rows[4].max() + 1  # three tied maxima
    rows[5] = 7.0  # all tied
    rows[6, 2] = -np.inf  # one absent entry
    rows[-1, :] = -0.0
    rows[-1, 1] = 0.0  # tied zeros of both signs
    return x


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 90, 700), (2000, 12), (8, 40_000)])
def test_large_rows_equal_inlined_and_keep_the_special_cases(dtype, shape):
    x = _special_rows(dtype, shape)
    assert numpy_fused._by_rows(x, (x.ndim - 1,))
    for name, build in ROW_CASES.items():
        fused, inlined = _both(build, dtype, x.ndim)
        if name == "logsumexp_grad":
            _assert_within_2_ulps([fused(x)], [inlined(x)])
        else:
            np.testing.assert_array_equal(fused(x), inlined(x), err_msg=name)
    lse = _both(ROW_CASES["logsumexp_last"], dtype, x.ndim)[0](x).reshape(-1)
    grad = _both(ROW_CASES["logsumexp_grad"], dtype, x.ndim)[0](x).reshape(-1, shape[-1]) / 1.5
    assert lse[1] == -np.inf and not grad[1].any()
    assert lse[2] == np.inf and grad[2, 3] == grad[2, 9] == 0.5 and grad[2].sum() == 1
    assert np.isnan(lse[3]) and np.isnan(grad[3]).all()
    assert lse[5] == pytest.approx(7 + np.log(shape[-1])) and np.allclose(grad[5], 1 / shape[-1])
    assert grad[6, 2] == 0
    assert np.all(np.isfinite(grad[[0, 4, 6, -1]]))
    np.testing.assert_allclose(grad[[0, 4, 5, 6, -1]].sum(axis=1), 1, rtol=1e-5)


def test_non_contiguous_and_small_arrays_take_the_general_code():
    x = np.random.default_rng(0).standard_normal((300, 400))
    assert not numpy_fused._by_rows(x.T, (1,)) and not numpy_fused._by_rows(x[:2, :3], (1,))
    assert not numpy_fused._by_rows(x, (0,)) and numpy_fused._by_rows(x, (1,))
    for build in ROW_CASES.values():
        fused, inlined = _both(build, "float64", 2)
        np.testing.assert_array_equal(fused(x.T), inlined(x.T))


def test_float16_logsumexp_accumulates_in_float32():
    x = sg.tensor("x", (None, None), "float16")
    f = sg.function([x], [sg.logsumexp(x, axis=-1), sg.grad(sg.sum(sg.logsumexp(x, axis=-1)), x)])
    values = np.full((4, 3000), -3.0, dtype=np.float16)  # a float16 sum of 3000 terms would stall
    lse, grad = f(values)
    assert lse.dtype == grad.dtype == np.float16
    np.testing.assert_allclose(lse.astype(float), -3 + np.log(3000), rtol=1e-3)
    np.testing.assert_allclose(grad.astype(float), 1 / 3000, rtol=1e-2)


# logsumexp's pullback, scaled, and the logsumexp beside it as one node (`row_pairs`): each value
# the separate nodes' (logsumexp, logsumexp_grad, then the multiply), bit for bit, on the general
# path; on the row path a scaled gradient is p · (w / total), within 2 ulps of (p / total) · w.
PAIRS = {
    # (outputs of x and w, the paired op expected among the nodes)
    "weighted": (lambda x, w, kd: _lse_and_grad(x, w, kd), LogSumExpAndScaledSoftmax),
    "constant_scale": (lambda x, w, kd: _lse_and_grad(x, 1.5, kd), LogSumExpAndScaledSoftmax),
    "unscaled": (lambda x, w, kd: _lse_and_grad(x, None, kd), LogSumExpAndScaledSoftmax),
    "gradient_only": (lambda x, w, kd: _lse_and_grad(x, w, kd)[1:], ScaledSoftmax),
    # the pullback's scale is 2 · logsumexp: the two stay apart, the gradient still one node
    "scale_from_the_lse": (lambda x, w, kd: _lse_and_grad(x, "lse", kd), ScaledSoftmax),
}


def _lse_and_grad(x, w, keepdims):
    lse = sg.logsumexp(x, axis=-1, keepdims=keepdims)
    if isinstance(w, str):
        terms = lse**2
    elif w is None:
        terms = lse
    else:
        terms = (sg.expand_dims(w, -1) if keepdims and not isinstance(w, float) else w) * lse
    return [lse, sg.grad(sg.sum(terms), x)]


def _paired_and_unfused(name, shape, dtype, keepdims):
    """(the function, its program run, the unfused graph's program run) for PAIRS[name]."""
    x, w = sg.tensor("x", shape, dtype), sg.tensor("w", shape[:-1], dtype)
    build, paired = PAIRS[name]
    outputs = build(x, w, keepdims)
    inputs = [x, w] if name in ("weighted", "gradient_only") else [x]
    f = sg.function(inputs, outputs)
    ops = {type(n.op) for n in f.nodes}
    assert paired in ops and LogSumExpGrad not in ops, ops
    assert (LogSumExp in ops) == (paired is ScaledSoftmax and name != "gradient_only")
    unfused = Program(f.graph.inputs, f.graph.outputs)
    unfused_ops = {type(n.op) for n in unfused.nodes}  # the graph as optimised: the user's nodes
    assert LogSumExpGrad in unfused_ops and not unfused_ops & {ScaledSoftmax, LogSumExpAndScaledSoftmax}
    return inputs, f._program.run, unfused.run


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert type(a) is type(b) and np.shape(a) == np.shape(b) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _assert_within_2_ulps(got, expected):
    """A scaled gradient on the row path, p · (w / total), against the nodes' (p / total) · w:
    two roundings each, each within 2u of the exact value (u = eps/2; a subnormal result within
    its spacing), so within 4u of each other; the entries that are not finite the same."""
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert type(a) is type(b) and np.shape(a) == np.shape(b) and a.dtype == b.dtype
        finite = np.isfinite(b)
        np.testing.assert_array_equal(np.where(finite, 0, a), np.where(finite, 0, b))
        info = np.finfo(b.dtype)
        np.testing.assert_allclose(a, b, rtol=2 * info.eps, atol=2 * info.smallest_subnormal)


def _values(dtype):
    huge = float(np.finfo(dtype).max) / 2
    return st.one_of(st.floats(-1e3, 1e3, width=32), st.sampled_from([*SPECIAL, huge, -huge]))


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("keepdims", [False, True])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_paired_ops_on_the_row_path_equal_the_unfused_nodes_bit_for_bit(name, dtype, keepdims, data):
    ndim = data.draw(st.integers(1, 3))
    shape = data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1, max_side=6))
    x = data.draw(hnp.arrays(dtype, shape, elements=_values(dtype)))
    if data.draw(st.booleans()):
        x[..., : shape[-1] // 2 + 1] = x.reshape(-1)[0]  # ties at the max
    w = data.draw(hnp.arrays(dtype, shape[:-1], elements=_values(dtype)))
    inputs, paired, unfused = _paired_and_unfused(name, shape, dtype, keepdims)
    values = [x, w][: len(inputs)]
    expected = unfused(values)  # (small arrays: the general code, node by node)
    sizes = {
        "_ROW_PATH_MIN": 0,
        "_BLOCK": data.draw(st.integers(1, 40)),
        "_SHORT_ROW": data.draw(st.sampled_from([0, 3, 99])),
    }
    with mock.patch.multiple(numpy_fused, **sizes):
        assert numpy_fused._by_rows(x, (ndim - 1,))
        got = paired(values)
    if name == "unscaled":
        _assert_same(got, expected)
    else:
        _assert_same(got[:-1], expected[:-1])  # (the logsumexp)
        _assert_within_2_ulps(got[-1:], expected[-1:])


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("keepdims", [False, True])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_paired_ops_on_the_general_path_equal_the_unfused_nodes_bit_for_bit(name, dtype, keepdims, data):
    ndim = data.draw(st.integers(1, 3))
    shape = data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=0, max_side=5))
    x = data.draw(hnp.arrays(dtype, shape, elements=_values(dtype)))
    if data.draw(st.booleans()):
        x = np.asfortranarray(x)  # (not C-ordered: the general code at any size)
    w = data.draw(hnp.arrays(dtype, shape[:-1], elements=_values(dtype)))
    inputs, paired, unfused = _paired_and_unfused(name, shape, dtype, keepdims)
    values = [x, w][: len(inputs)]
    _assert_same(paired(values), unfused(values))


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 90, 700), (2000, 12), (8, 40_000)])
def test_large_paired_rows_equal_the_unfused_nodes_and_keep_the_special_cases(name, dtype, shape):
    x = _special_rows(dtype, shape)
    w = np.random.default_rng(3).standard_normal(shape[:-1]).astype(dtype)
    w.reshape(-1)[:6] = [np.inf, np.nan, 0.0, -0.0, -np.inf, 1e30]
    for keepdims in (False, True):
        inputs, paired, unfused = _paired_and_unfused(name, shape, dtype, keepdims)
        values = [x, w][: len(inputs)]
        assert numpy_fused._by_rows(x, (x.ndim - 1,))
        got, expected = paired(values), unfused(values)
        if name == "unscaled":
            _assert_same(got, expected)
        else:
            _assert_same(got[:-1], expected[:-1])
            _assert_within_2_ulps(got[-1:], expected[-1:])
    if name == "unscaled":
        lse, grad = paired([x])
        lse, grad = lse.reshape(-1), grad.reshape(-1, shape[-1])
        assert lse[1] == -np.inf and not grad[1].any()
        assert lse[2] == np.inf and grad[2, 3] == grad[2, 9] == 0.5 and grad[2].sum() == 1
        assert np.isnan(lse[3]) and np.isnan(grad[3]).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 90, 700), (2000, 12), (5, 6), (1, 4)])
def test_the_paired_ops_perform_as_their_numpy_implementations(dtype, shape):
    x = _special_rows(dtype, shape) if shape[0] > 6 else np.random.default_rng(2).normal(size=shape).astype(dtype)
    scales = [np.full((1,) * x.ndim, 1, dtype), np.full((1,) * x.ndim, -2.5, dtype)]
    scales.append(np.random.default_rng(4).normal(size=shape[:-1] + (1,)).astype(dtype))
    if shape[0] == 1:  # a scale that broadcasts x (extents known only at run time)
        scales.append(np.linspace(-1, 2, 3, dtype=dtype).reshape((3,) + (1,) * (x.ndim - 1)))
    with np.errstate(all="ignore"):  # (as the executor runs them)
        for scale in scales:
            same = _assert_same if np.all(scale == 1) else _assert_within_2_ulps  # (1: the terms / total)
            for keepdims in (False, True):
                op = LogSumExpAndScaledSoftmax(keepdims)
                lse, grad = numpy_fused.FUSED[type(op)](op)(x, scale)
                expected_lse, expected_grad = op.perform(x, scale)
                _assert_same([lse], [expected_lse])
                same([grad], [expected_grad])
            fast = numpy_fused.FUSED[ScaledSoftmax](ScaledSoftmax())
            same([fast(x, scale)], [ScaledSoftmax().perform(x, scale)])


def test_w1_runs_the_logsumexp_and_its_gradient_as_one_node():
    x, w = sg.tensor("x", (1000, 1000)), sg.tensor("w", (1000,))
    cost = sg.sum(w * sg.logsumexp(x, axis=-1))
    f = sg.function([x, w], [cost, sg.grad(cost, x)])
    ops = [type(n.op) for n in f.nodes]
    assert ops.count(LogSumExpAndScaledSoftmax) == 1 and not {LogSumExp, LogSumExpGrad} & set(ops)
    assert not any(n.outputs[0].type.shape == (1000, 1000) for n in f.nodes if type(n.op) is not ops[2])
    rng = np.random.default_rng(5)
    values = [rng.standard_normal((1000, 1000)), rng.standard_normal(1000)]
    got, expected = f._program.run(values), Program(f.graph.inputs, f.graph.outputs).run(values)
    _assert_same(got[:1], expected[:1])
    _assert_within_2_ulps(got[1:], expected[1:])  # (w · the softmax: w / total a row, then a product an entry)


@pytest.mark.parametrize("w_shape", [(7,), (1,)])
def test_with_unknown_extents_the_weighted_loss_still_pairs_its_logsumexp(w_shape):
    """The seed of `sum(w * lse)` reads the shape of `w * lse`; taken from w and x instead,
    the logsumexp joins its gradient's node (w of one entry still broadcasts)."""
    x, w = sg.matrix("x"), sg.vector("w")
    cost = sg.sum(w * sg.logsumexp(x, axis=-1))
    f = sg.function([x, w], [cost, sg.grad(cost, x)])
    ops = [type(n.op) for n in f.nodes]
    assert ops.count(LogSumExpAndScaledSoftmax) == 1 and not {LogSumExp, LogSumExpGrad, ScaledSoftmax} & set(ops)
    rng = np.random.default_rng(6)
    values = [rng.standard_normal((7, 9)), rng.standard_normal(w_shape)]
    _assert_same(f._program.run(values), Program(f.graph.inputs, f.graph.outputs).run(values))
    p = np.exp(values[0] - np.log(np.sum(np.exp(values[0]), axis=-1, keepdims=True)))
    np.testing.assert_allclose(f(*values)[1], values[1][:, None] * p, rtol=1e-14)


def test_check_finite_keeps_the_users_nodes():
    x, w = sg.tensor("x", (4, 5)), sg.tensor("w", (4,))
    cost = sg.sum(w * sg.logsumexp(x, axis=-1))
    checked = sg.function([x, w], [cost, sg.grad(cost, x)], check_finite=True)
    ops = {type(n.op) for n in checked.nodes}
    assert LogSumExpGrad in ops and not ops & {ScaledSoftmax, LogSumExpAndScaledSoftmax}


def test_float16_pairs_in_float32():
    x = sg.tensor("x", (4, 3000), "float16")
    cost = sg.sum(sg.logsumexp(x, axis=-1))
    f = sg.function([x], [sg.logsumexp(x, axis=-1), sg.grad(cost, x)])
    (paired,) = [n for n in f.nodes if isinstance(n.op, LogSumExpAndScaledSoftmax | ScaledSoftmax)]
    assert paired.inputs[0].dtype == np.float32  # (the row ops take float32 and float64 only)
    values = [_special_rows("float16", (8, 3000))[:4]]
    _assert_same(f._program.run(values), Program(f.graph.inputs, f.graph.outputs).run(values))
