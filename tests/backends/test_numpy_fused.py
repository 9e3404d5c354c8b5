"""The NumPy backend's whole-op implementations are bit-for-bit their ops' inlined bodies."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
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
