"""The Numba backend: its kernels give the NumPy backend's values and edge values, and its
exp is within an ulp of the exact one."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg

pytest.importorskip("numba")
mpmath = pytest.importorskip("mpmath")

from stablegrad.backends.numba_backend import kernels  # noqa: E402  (needs numba)

SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 800.0, -800.0, 1e-300]

CASES = {
    "logsumexp": lambda x: sg.logsumexp(x, axis=-1),
    "logsumexp_keepdims": lambda x: sg.logsumexp(x, axis=-1, keepdims=True),
    "logsumexp_first_axis": lambda x: sg.logsumexp(x, axis=0),  # the kernels down the columns
    "logsumexp_first_axis_keepdims": lambda x: sg.logsumexp(x, axis=0, keepdims=True),
    "logsumexp_first_axis_grad": lambda x: sg.grad(sg.sum(sg.logsumexp(x, axis=0) * 1.5), x),
    "logsumexp_grad": lambda x: sg.grad(sg.sum(sg.logsumexp(x, axis=-1) * 1.5), x),
    "weighted_lse_grad": lambda x: sg.grad(sg.sum(sg.logsumexp(x, axis=-1) * sg.arange(x.shape[0])), x),
    "hessian_vector": lambda x: sg.hessian_vector_product(sg.sum(sg.logsumexp(x, axis=-1)), x, sg.ones_like(x)),
}


def _kernel_names(f) -> set[str]:
    return {getattr(getattr(fn, "func", fn), "__qualname__", "") for fn, *_ in f._program.steps}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@given(data=st.data())
def test_the_numba_backend_gives_the_numpy_backends_values(name, dtype, data):
    x = sg.tensor("x", shape=(None, None), dtype=dtype)
    y = CASES[name](x)
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=6))
    elements = st.one_of(st.sampled_from(SPECIAL), st.floats(-50, 50, width=32))
    values = data.draw(hnp.arrays(dtype, shape, elements=elements))
    if data.draw(st.booleans()) and values.size:
        values[:, : shape[1] // 2 + 1] = values.flat[0]  # ties at the max
    with np.errstate(all="ignore"):
        expected = sg.function([x], y)(values)
        got = sg.function([x], y, backend="numba")(values)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    eps = np.finfo(dtype).eps
    # the same edge values; finite ones within a few ulps (sums run in another order)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=16 * eps, atol=16 * eps)


def test_the_kernels_run_where_they_apply_and_the_numpy_path_elsewhere():
    x, w = sg.tensor("x", shape=(4, 5)), sg.tensor("w", shape=(4,))
    cost = sg.sum(w * sg.logsumexp(x, axis=1))
    both = sg.function([x, w], [cost, sg.grad(cost, x)], backend="numba")
    assert [type(n.op).__name__ for n in both.nodes].count("LogSumExpAndScaledSoftmax") == 1
    assert not {"LogSumExp", "LogSumExpGrad"} & {type(n.op).__name__ for n in both.nodes}
    only_grad = sg.function([x, w], sg.grad(cost, x), backend="numba")
    assert "ScaledSoftmax" in {type(n.op).__name__ for n in only_grad.nodes}
    # unknown extents: the scale's shape, read from w · logsumexp, is taken from w and x, so the two pair too
    xu, wu = sg.matrix("xu"), sg.vector("wu")
    cost_u = sg.sum(wu * sg.logsumexp(xu, axis=1))
    unknown = sg.function([xu, wu], [cost_u, sg.grad(cost_u, xu)], backend="numba")
    assert [type(n.op).__name__ for n in unknown.nodes].count("LogSumExpAndScaledSoftmax") == 1
    lse_down = sg.logsumexp(x, axis=0)
    over_columns = sg.function([x], [lse_down, sg.grad(sg.sum(lse_down), x)], backend="numba")
    assert {"_logsumexp_down", "_softmax_down"} <= _kernel_names(over_columns)
    middle = sg.function([x], sg.logsumexp(sg.reshape(x, (2, 2, 5)), axis=1), backend="numba")
    assert _kernel_names(middle) == _kernel_names(sg.function([x], sg.logsumexp(sg.reshape(x, (2, 2, 5)), axis=1)))
    values, weights = np.random.default_rng(0).normal(size=(4, 5)), np.arange(4.0)
    for got, expected in zip(both(values, weights), sg.function([x, w], [cost, sg.grad(cost, x)])(values, weights)):
        np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-17)


def test_a_scale_computed_from_the_logsumexp_keeps_the_two_apart():
    x = sg.matrix("x")
    cost = sg.sum(sg.logsumexp(x, axis=1) ** 2)  # the pullback's scale is 2 · logsumexp
    f = sg.function([x], [cost, sg.grad(cost, x)], backend="numba")
    assert "LogSumExpAndScaledSoftmax" not in {type(n.op).__name__ for n in f.nodes}
    values = np.random.default_rng(1).normal(size=(3, 4))
    for got, expected in zip(f(values), sg.function([x], [cost, sg.grad(cost, x)])(values)):
        np.testing.assert_allclose(got, expected, rtol=1e-14)


def test_edge_rows_match_the_stable_body():
    x = sg.matrix("x")
    rows = np.array(
        [
            [-np.inf, -np.inf, -np.inf],  # nothing: -inf, gradient 0
            [np.inf, 1.0, np.inf],  # +inf entries share the mass
            [np.nan, 1.0, 2.0],  # NaN stays NaN
            [0.0, -40.0, -np.inf],  # an exact tail
            [5.0, 5.0, 5.0],  # all tied
        ]
    )
    value, grad = sg.function(
        [x], [sg.logsumexp(x, axis=1), sg.grad(sg.sum(sg.logsumexp(x, axis=1)), x)], backend="numba"
    )(rows)
    assert value[0] == -np.inf and value[1] == np.inf and np.isnan(value[2])
    assert value[3] == np.log1p(np.exp(-40.0))  # 4.248e-18, kept
    np.testing.assert_allclose(value[4], 5.0 + np.log(3.0), rtol=1e-15)
    np.testing.assert_array_equal(grad[0], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(grad[1], [0.5, 0.0, 0.5])
    assert np.isnan(grad[2]).all()
    np.testing.assert_allclose(grad[4], [1 / 3] * 3, rtol=1e-16)


def test_edge_columns_match_the_edge_rows():
    """The kernels down the columns (logsumexp over leading axes) keep the row kernels' edges."""
    x = sg.matrix("x")
    rows = np.array(
        [[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, np.inf], [np.nan, 1.0, 2.0], [0.0, -40.0, -np.inf], [5.0, 5.0, 5.0]]
    )

    def value_and_grad(axis):
        lse = sg.logsumexp(x, axis=axis)
        return sg.function([x], [lse, sg.grad(sg.sum(lse), x)], backend="numba")

    along, down = value_and_grad(1)(rows), value_and_grad(0)(np.ascontiguousarray(rows.T))
    np.testing.assert_array_equal(down[0], along[0])
    np.testing.assert_array_equal(down[1], along[1].T)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_logsumexp_over_two_leading_axes(dtype):
    """Against the float64 values: the column passes fold x - max's rounding error back into a
    float32 term (without it, a float32 x - max loses up to half an ulp of 100, 1e-5 of a term
    as small as exp(-80))."""

    def outputs(x):
        lse = sg.logsumexp(x, axis=(0, 1))
        return [lse, sg.logsumexp(x, axis=(1, 0), keepdims=True), sg.grad(sg.sum(lse), x)]

    x, x64 = sg.tensor("x", shape=(None, None, None), dtype=dtype), sg.tensor("x64", shape=(None, None, None))
    values = np.random.default_rng(5).normal(scale=30, size=(3, 4, 5)).astype(dtype)
    values[:, :, 0] = -np.inf  # a column with nothing: -inf, gradient 0
    got = sg.function([x], outputs(x), backend="numba")(values)
    expected = sg.function([x64], outputs(x64))(values.astype(np.float64))
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == dtype
        np.testing.assert_allclose(g, e, rtol=4 * np.finfo(dtype).eps, atol=np.finfo(dtype).tiny)
    assert np.all(got[0][0] == -np.inf) and np.all(got[2][:, :, 0] == 0.0)
    empty = sg.function([x], outputs(x)[0], backend="numba")(np.zeros((0, 2, 3), dtype=dtype))
    np.testing.assert_array_equal(empty, np.full(3, -np.inf, dtype=dtype))


def test_an_empty_last_axis_and_a_3d_input():
    x = sg.tensor("x", shape=(None, None, None))
    f = sg.function([x], [sg.logsumexp(x, axis=-1), sg.softmax(x, axis=-1)], backend="numba")
    lse, _ = f(np.zeros((2, 3, 0)))
    np.testing.assert_array_equal(lse, np.full((2, 3), -np.inf))
    values = np.random.default_rng(0).normal(size=(2, 3, 4))
    for got, expected in zip(f(values), sg.function([x], [sg.logsumexp(x, axis=-1), sg.softmax(x, axis=-1)])(values)):
        np.testing.assert_allclose(got, expected, rtol=1e-15)


def _entrywise(kernel):
    """`apply(x, out)`: out[i] = kernel(x[i]), compiled (the kernels are Numba functions)."""
    import numba

    @numba.njit
    def apply(x, out):
        for i in range(x.size):
            out[i] = kernel(x[i])

    return apply


def test_exp_is_within_an_ulp_across_the_whole_range():
    apply = _entrywise(kernels.exp)

    rng = np.random.default_rng(1)
    thresholds = [709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412, -708.3964185322641]
    t = np.concatenate([rng.uniform(-746, 710, 2000), rng.uniform(-1e-3, 1e-3, 200), thresholds, [0.0, -0.0, 1e-300]])
    out = np.empty_like(t)
    apply(t, out)
    with mpmath.workdps(40):
        for ti, got in zip(t, out):
            exact = mpmath.exp(mpmath.mpf(ti))
            nearest = float(exact)
            spacing = np.spacing(nearest) if nearest >= np.finfo(float).tiny else np.finfo(float).smallest_subnormal
            if not np.isfinite(nearest) or nearest == 0.0:
                assert got == nearest, f"exp({ti!r}) = {got!r}, not {nearest!r}"
            else:
                assert abs(mpmath.mpf(got) - exact) <= spacing, f"exp({ti!r}) = {got!r}, exactly {exact}"
    special = np.array([np.inf, -np.inf, np.nan])
    out = np.empty(3)
    apply(special, out)
    assert out[0] == np.inf and out[1] == 0.0 and np.isnan(out[2])


def test_log1p_of_a_nonnegative_number_is_within_two_ulps_everywhere():
    apply = _entrywise(kernels.log1p_nonnegative)

    rng = np.random.default_rng(2)
    edges = [np.sqrt(2) - 1, np.nextafter(np.sqrt(2) - 1, 0), np.sqrt(2) - 1 + 1e-16, 1.0, 2.0, 5e-324, 1e-300, 1e308]
    y = np.concatenate(
        [
            10 ** rng.uniform(-320, -1, 1500),  # tiny: log1p(y) = y to the last bit
            rng.uniform(0, 1, 1500),  # both sides of sqrt(2) - 1
            np.arange(200.0),  # ties - 1: whole numbers
            10 ** rng.uniform(0, 308, 1500),
            edges,
        ]
    )
    out = np.empty_like(y)
    apply(y, out)
    with mpmath.workdps(40):
        for yi, got in zip(y, out):
            exact = mpmath.log1p(mpmath.mpf(yi))
            spacing = np.spacing(float(exact)) if yi > 0 else 0.0
            assert abs(mpmath.mpf(got) - exact) <= 2 * spacing, f"log1p({yi!r}) = {got!r}, exactly {exact}"
    special = np.array([np.inf, np.nan])
    out = np.empty(2)
    apply(special, out)
    assert out[0] == np.inf and np.isnan(out[1])


def test_exp32_is_within_two_float32_ulps_across_its_range():
    apply = _entrywise(kernels.exp32)

    rng = np.random.default_rng(3)
    edges = [88.72283, 88.7228, -103.97208, -103.9, -87.33655, -87.3, 0.0, -0.0, 1e-30]
    t = np.concatenate([rng.uniform(-104, 89, 20000), rng.uniform(-1e-3, 1e-3, 500), edges]).astype(np.float32)
    out = np.empty_like(t)
    apply(t, out)
    exact = np.array([float(mpmath.exp(mpmath.mpf(float(ti)))) for ti in t])  # float64 is far finer than float32
    with np.errstate(over="ignore"):  # (past 88.72: inf in float32)
        nearest = exact.astype(np.float32)
    finite = np.isfinite(nearest) & (nearest > 0)
    spacing = np.spacing(nearest[finite]).astype(np.float64)
    assert np.all(np.abs(out[finite].astype(np.float64) - exact[finite]) <= 2 * spacing)
    assert np.all(out[~finite] == nearest[~finite])  # overflow to inf, underflow to 0 where float32 has them
    special = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    out = np.empty(3, dtype=np.float32)
    apply(special, out)
    assert out[0] == np.inf and out[1] == 0.0 and np.isnan(out[2])


@pytest.mark.parametrize(
    "full, nonpositive, dtype, low",
    [("exp", "exp_nonpositive", np.float64, -750.0), ("exp32", "exp32_nonpositive", np.float32, -110.0)],
)
def test_the_nonpositive_exps_equal_the_full_ones_bit_for_bit(full, nonpositive, dtype, low):
    """The softmax family's terms exp(x - max) take the one-scaling form: the same values,
    subnormal results (where the scaling rounds) included."""
    rng = np.random.default_rng(4)
    tiny = np.finfo(dtype).tiny
    t = np.concatenate(
        [
            rng.uniform(low, 0, 20000),
            -np.geomspace(1e-30, -low, 20000),
            np.log([tiny, tiny / 2, tiny / 3]) + [0, 1e-9, -1e-9],  # around the subnormal edge
            [0.0, -0.0, -np.inf, np.nan],
        ]
    ).astype(dtype)
    expected, got = np.empty_like(t), np.empty_like(t)
    _entrywise(getattr(kernels, full))(t, expected)
    _entrywise(getattr(kernels, nonpositive))(t, got)
    np.testing.assert_array_equal(got, expected)
    assert np.any((got > 0) & (got < tiny))  # subnormal results were reached


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "row, expected",
    [
        ([1.0, np.nan, 3.0], np.nan),
        ([-np.inf, np.nan], np.nan),  # a NaN wins, also against -inf
        ([-np.inf, -np.inf], -np.inf),
        ([np.inf, -np.inf, 2.0], np.inf),
        ([-5.0, -3.0, -4.0], -3.0),
        ([-1e-310, -1e-300], -1e-310),
        ([-0.0, 0.0], 0.0),
        ([], -np.inf),
    ],
)
def test_the_row_max_as_an_integer_max(dtype, row, expected):
    """Ordered as floats (negatives by flipped bits), NaN as np.maximum, -inf over nothing."""
    import numba

    @numba.njit
    def row_max(x):
        return kernels._row_max(x)

    got = row_max(np.array(row, dtype=dtype))
    want = np.float64(dtype(expected))
    assert got == want or (np.isnan(got) and np.isnan(want))
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore"):  # (float32: some are ±inf, some 0)
        values = (rng.normal(size=997) * 10.0 ** rng.uniform(-300, 300, 997)).astype(dtype)
    assert row_max(values) == np.max(values)


def test_a_read_only_input_to_a_short_row_logsumexp():
    x = sg.vector("x")
    values = np.zeros(3)
    values.setflags(write=False)  # as a caller's constant or a broadcast view arrives
    np.testing.assert_allclose(sg.function([x], sg.logsumexp(x), backend="numba")(values), np.log(3.0), rtol=1e-15)
