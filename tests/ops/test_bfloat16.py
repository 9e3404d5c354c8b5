"""bfloat16 (ml_dtypes' type, as JAX's): inputs, promotion, float32 accumulation, the error without ml_dtypes.

The spec, as JAX: elementwise ops of bfloat16 give bfloat16; the softmax family, sums and means
compute in float32 and round once.  So each value here is the exact answer (mpmath, 50 digits)
rounded to bfloat16, within one bfloat16 ulp (float32's own error can tip a rounding that is
within 2⁻¹⁶ of a tie; a bfloat16 accumulation is off by tens of ulps on these rows).
"""

from __future__ import annotations

import sys

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.errors import DTypeError, InputError
from stablegrad.graph.types import is_floating, is_inexact

BF16 = np.dtype(ml_dtypes.bfloat16)
INF = np.inf
mp.mp.dps = 50


def bf16(values) -> np.ndarray:
    """Exact values (mpf or float) rounded to bfloat16 (through float64: exact for these magnitudes)."""
    return np.asarray(np.vectorize(float, otypes=[np.float64])(values)).astype(BF16)


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The most bfloat16 ulps between two bfloat16 arrays (equal infinities and NaNs are 0 apart)."""
    assert a.dtype == BF16 and b.dtype == BF16 and a.shape == b.shape
    both_nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
    ia, ib = a.view(np.int16).astype(np.int64), b.view(np.int16).astype(np.int64)
    # bit patterns in the order of the numbers they stand for (sign-magnitude → two's complement)
    ia, ib = np.where(ia < 0, -32768 - ia, ia), np.where(ib < 0, -32768 - ib, ib)
    return int(np.max(np.where(both_nan, 0, np.abs(ia - ib)), initial=0))


def mp_lse(row) -> mp.mpf:
    finite = [mp.mpf(float(v)) for v in row if v != -INF]
    return mp.log(mp.fsum(mp.exp(v) for v in finite)) if finite else mp.mpf("-inf")


ROWS = np.array(
    [
        [0.5, -1.25, 3.0, 2.0, -0.75, 1.0],
        [1e30, 1e30, -3.0, 0.0, 5.0, -1e30],  # exp overflows bfloat16 (and float32); log space does not
        [-INF, 2.0, -INF, 0.25, -7.0, 2.0],
        [-100.0, -99.0, -98.5, -120.0, -101.0, -97.0],
    ]
).astype(BF16)


def x_input(shape=(None, 6)):
    return sg.tensor("x", shape=shape, dtype="bfloat16")


# -- building and passing bfloat16 ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bfloat16", ml_dtypes.bfloat16, BF16, "jnp"])
def test_bfloat16_inputs_are_declared_by_name_or_type(dtype):
    if dtype == "jnp":
        import jax.numpy as jnp

        dtype = jnp.bfloat16
    x = sg.tensor("x", shape=(2,), dtype=dtype)
    assert x.dtype == BF16 and str(x.type) == "bfloat16[2]"
    assert is_floating(x.dtype) and is_inexact(x.dtype) and x.type.is_float()


def test_bfloat16_is_not_a_numpy_float_kind_but_is_floating_here():
    # the reason the checks are centralised: NumPy files ml_dtypes' type under kind 'V'
    assert BF16.kind == "V"
    assert not is_floating(np.dtype([("a", np.float32)]))  # another 'V' dtype (a record) is not
    assert not is_floating(np.dtype(ml_dtypes.float8_e4m3fn))


def test_arguments_convert_to_and_from_bfloat16():
    x = x_input((3,))
    f = sg.function([x], x * 2.0)
    out = f(np.array([1.0, 2.5, -3.0], np.float32))  # float32 values that bfloat16 holds exactly
    assert out.dtype == BF16 and out.astype(np.float64).tolist() == [2.0, 5.0, -6.0]
    y = sg.vector("y", dtype="float32")
    assert sg.function([y], y + 1.0)(np.array([1.5], BF16)).tolist() == [2.5]


def test_an_argument_past_the_bfloat16_range_is_an_error():
    x = x_input((1,))
    with pytest.raises(InputError, match="past its range"):
        sg.function([x], x * 1.0)(np.array([1e39], np.float64))


def test_without_ml_dtypes_bfloat16_is_an_error_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now raises ImportError
    with pytest.raises(DTypeError, match="ml_dtypes"):
        sg.tensor("x", shape=(2,), dtype="bfloat16")
    with pytest.raises(DTypeError, match="ml_dtypes"):
        sg.astype(sg.vector("v"), "bfloat16")
    assert sg.tensor("x", shape=(2,), dtype="float32").dtype == np.float32  # the rest needs no ml_dtypes


# -- promotion, as JAX -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (2.0, BF16),  # weak Python scalars keep bfloat16
        (3, BF16),
        (True, BF16),
        ("float16", np.dtype(np.float32)),  # neither holds the other: float32, as jnp.promote_types
        ("float32", np.dtype(np.float32)),
        ("float64", np.dtype(np.float64)),
        ("bfloat16", BF16),
        ("int8", BF16),
        ("bool", BF16),
    ],
)
def test_promotion_table(other, expected):
    x = x_input((2,))
    y = other if not isinstance(other, str) else sg.tensor("y", shape=(2,), dtype=other)
    for out in (x + y, y * x, sg.maximum(x, y)):
        assert out.dtype == expected, (other, out.type)


def test_elementwise_ops_keep_bfloat16_also_where_numpy_has_no_bfloat16_loop():
    # SciPy's erf answers bfloat16 in float64 and NumPy's clip in float32; JAX keeps bfloat16
    x = x_input((3,))
    v = np.array([0.5, -1.0, 2.0], BF16)
    for out, exact in (
        (sg.erf(x), [mp.erf(0.5), mp.erf(-1), mp.erf(2)]),
        (sg.clip(x, -0.75, 1.0), [0.5, -0.75, 1.0]),
        (sg.exp(x), [mp.exp(0.5), mp.exp(-1), mp.exp(2)]),
    ):
        got = sg.function([x], out)(v)
        assert out.dtype == BF16 and got.dtype == BF16
        assert ulps(got, bf16(exact)) <= 1


# -- the softmax family and sums: float32 inside, rounded once ------------------------------------------
def test_logsumexp_values_and_gradient():
    x = x_input()
    out = sg.logsumexp(x, axis=1)
    value, grad = sg.function([x], [out, sg.grad(sg.sum(out), x)])(ROWS)
    lse = [mp_lse(r) for r in ROWS]
    assert value.dtype == BF16 and grad.dtype == BF16
    assert ulps(value, bf16(lse)) <= 1
    softmax = [[mp.exp(float(v) - m) if v != -INF else 0 for v in r] for r, m in zip(ROWS, lse)]
    assert ulps(grad, bf16(softmax)) <= 1
    assert np.isfinite(value.astype(np.float32)).all()  # 1e30 rows: finite in log space


def test_softmax_and_log_softmax_values_and_gradients():
    x = x_input()
    w = np.array([-1.0, -0.5, -0.25, 0.25, 0.5, 1.0], BF16)  # a cotangent not constant along the row
    p, lp = sg.softmax(x, axis=1), sg.log_softmax(x, axis=1)
    fn = sg.function([x], [p, lp, sg.grad(sg.sum(p * w), x), sg.grad(sg.sum(lp * w), x)])
    got_p, got_lp, got_gp, got_glp = fn(ROWS)
    lse = [mp_lse(r) for r in ROWS]
    exact_lp = [[mp.mpf(float(v)) - m for v in r] for r, m in zip(ROWS, lse)]
    exact_p = [[mp.exp(v) for v in r] for r in exact_lp]
    wm = [mp.mpf(float(c)) for c in w]
    exact_gp = [[pi * (wi - mp.fsum(pj * wj for pj, wj in zip(r, wm))) for pi, wi in zip(r, wm)] for r in exact_p]
    exact_glp = [[wi - pi * mp.fsum(wm) for pi, wi in zip(r, wm)] for r in exact_p]
    for got, exact in ((got_p, exact_p), (got_lp, exact_lp), (got_gp, exact_gp), (got_glp, exact_glp)):
        assert got.dtype == BF16
        assert ulps(got, bf16(exact)) <= 1


def test_softplus_and_log_sigmoid_values_and_gradients():
    x = x_input((8,))
    v = np.array([-1e30, -200.0, -3.5, 0.0, 0.3, 9.0, 300.0, 1e30], BF16)
    sp, ls = sg.softplus(x), sg.log_sigmoid(x)
    fn = sg.function([x], [sp, ls, sg.grad(sg.sum(sp), x), sg.grad(sg.sum(ls), x)])
    got = fn(v)
    xs = [mp.mpf(float(t)) for t in v]
    sigmoid = [1 / (1 + mp.exp(-t)) for t in xs]
    exact = (
        [mp.log1p(mp.exp(t)) for t in xs],
        [-mp.log1p(mp.exp(-t)) for t in xs],
        sigmoid,
        [1 - s for s in sigmoid],
    )
    for g, e in zip(got, exact):
        assert g.dtype == BF16
        assert ulps(g, bf16(e)) <= 1


def test_logaddexp_of_values_past_the_bfloat16_exp_range():
    a, b = x_input((3,)), x_input((3,))
    out = sg.logaddexp(a, b)
    va = np.array([1e30, 100.0, -INF], BF16)
    vb = np.array([1e30, 99.0, 3.0], BF16)
    got, ga = sg.function([a, b], [out, sg.grad(sg.sum(out), a)])(va, vb)
    exact = [mp_lse([s, t]) for s, t in zip(va, vb)]
    assert got.dtype == BF16 and ulps(got, bf16(exact)) <= 1
    assert ulps(ga, bf16([0.5, 1 / (1 + mp.exp(-1)), 0])) <= 1


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_sum_and_mean_accumulate_in_float32(reduce):
    # a bfloat16 running sum of ones stops at 256 (256 + 1 rounds back to 256)
    x = x_input((4, 1024))
    v = np.ones((4, 1024), BF16)
    v[1] = np.float32(2**-8)
    out = getattr(sg, reduce)(x)
    value, grad = sg.function([x], [out, sg.grad(out, x)])(v)
    total = 3 * 1024 + 1024 * 2**-8
    expected = total if reduce == "sum" else total / 4096
    assert value.dtype == BF16 and ulps(value.reshape(1), bf16([expected])) == 0
    assert grad.dtype == BF16 and np.all(grad == np.asarray(1.0 if reduce == "sum" else 1 / 4096, BF16))


def test_sum_along_an_axis():
    x = x_input((3, 600))
    rng = np.random.default_rng(7)
    v = rng.uniform(0.5, 2.0, (3, 600)).astype(BF16)
    got = sg.function([x], sg.sum(x, axis=1))(v)
    exact = [mp.fsum(mp.mpf(float(t)) for t in row) for row in v]
    assert got.dtype == BF16 and ulps(got, bf16(exact)) <= 1


def test_logsumexp_accumulates_in_float32():
    x = x_input((1, 4096))
    got = sg.function([x], sg.logsumexp(x, axis=1))(np.zeros((1, 4096), BF16))
    assert ulps(got, bf16([mp.log(4096)])) == 0


# -- the edges ----------------------------------------------------------------------------------------
def test_edges_of_logsumexp_and_softmax():
    x = x_input((None, 3))
    lse, p = sg.logsumexp(x, axis=1), sg.softmax(x, axis=1)
    rows = np.array([[-INF, -INF, -INF], [INF, 1.0, 2.0], [1e30, 1e30, 1.0], [3e38, 3e38, 0.0]], BF16)
    got_lse, got_p = sg.function([x], [lse, p])(rows)
    assert got_lse[0] == -INF and got_lse[1] == INF
    assert got_lse[2] == np.asarray(1e30, BF16)  # log 2 is far below half an ulp of 1e30
    assert got_lse[3] == np.asarray(3e38, BF16)  # near bfloat16's largest finite value: no overflow
    assert np.isnan(got_p[0].astype(np.float32)).all()  # 0/0 as in every dtype (the edge table)
    assert got_p[2].astype(np.float64).tolist() == [0.5, 0.5, 0.0]
    assert got_p[3].astype(np.float64).tolist() == [0.5, 0.5, 0.0]
    naive = sg.function([x], sg.exp(x))(rows[2:3])  # the naive formula overflows there
    assert np.isinf(naive.astype(np.float32)[0, :2]).all()


# -- every backend (also run whole with STABLEGRAD_TEST_BACKEND) ---------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "jax", "numba"])
def test_each_backend_accumulates_in_float32_and_returns_bfloat16(backend):
    # JAX computes bfloat16 natively (jnp.bfloat16 is ml_dtypes' type); Numba compiles no bfloat16
    # kernel, so its backend runs these nodes as the NumPy backend does
    x = x_input()
    out, total = sg.logsumexp(x, axis=1), sg.sum(x, axis=1)
    fn = sg.function([x], [out, sg.grad(sg.sum(out), x), total], backend=backend)
    rows = np.concatenate([ROWS[[0, 2, 3]], np.full((1, 6), 100.0)]).astype(BF16)
    value, grad, got_total = fn(rows)
    assert value.dtype == grad.dtype == got_total.dtype == BF16
    lse = [mp_lse(r) for r in rows]
    assert ulps(value, bf16(lse)) <= 1
    assert ulps(grad, bf16([[mp.exp(float(v) - m) if v != -INF else 0 for v in r] for r, m in zip(rows, lse)])) <= 1
    exact_totals = [mp.fsum(mp.mpf(float(v)) for v in r) for r in rows]
    assert ulps(got_total, bf16(exact_totals)) <= 1
