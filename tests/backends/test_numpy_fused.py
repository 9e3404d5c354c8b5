"""The NumPy backend's whole-op implementations are bit-for-bit their ops' inlined bodies."""

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.backends import numpy_fused
from stablegrad.backends.numpy_program import runs_whole
from stablegrad.ops.stable import LogSumExp, Softmax
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
