"""Fused loop nests on the Numba backend: the same values as the NumPy backend, fewer passes."""

import math

import numpy as np
import pytest

pytest.importorskip("numba")

import stablegrad as sg
from stablegrad.backends.numba_backend import loops
from stablegrad.backends.numba_backend.loop_source import source

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", str(tmp_path))


def _loops(f) -> list:
    return [n for n in f.nodes if isinstance(n.op, loops.Loop)]


def _both(inputs, outputs, values):
    fused = sg.function(inputs, outputs, backend="numba")
    return fused, fused(*values), sg.function(inputs, outputs)(*values)


def _mixture(n=4000, k=5):
    x, mu, ls, lg = (sg.tensor(name, (m,), "float64") for name, m in (("x", n), ("mu", k), ("ls", k), ("lg", k)))
    z = (x[:, None] - mu[None, :]) * sg.exp(-ls)[None, :]
    lp = sg.log_softmax(lg, axis=0) - ls - 0.5 * math.log(2 * math.pi) - 0.5 * z * z
    cost = sg.sum(sg.logsumexp(lp, axis=1))
    return [x, mu, ls, lg], [cost, *sg.grad(cost, [mu, ls, lg])]


def test_a_mixture_likelihood_and_its_gradient_run_as_one_loop():
    inputs, outputs = _mixture()
    values = [RNG.normal(size=4000) * 3, RNG.normal(size=5), RNG.normal(size=5) * 0.3, RNG.normal(size=5)]
    f, got, expected = _both(inputs, outputs, values)
    (loop,) = _loops(f)  # forward chain, logsumexp with its softmax, the pullback and its sums
    assert "for b0 in range(0, 4000, 256)" in source(loop.op)  # short rows: blocks of rows
    # nothing of the data's size is left outside the loop but the sum of the per-row logsumexps
    big = [n for n in f.nodes if n is not loop and any(math.prod(v.type.shape) >= 4000 for v in n.outputs)]
    assert [n.op.name for n in big] == ["expand_dims"]  # x[:, None]: a view
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-12 * np.max(np.abs(e)))


def test_elementwise_chains_keep_numpys_values_dtypes_and_edges():
    x = sg.tensor("x", (64, 40), "float32")
    y = sg.tensor("y", (40,), "float32")
    c = sg.tensor("c", (64, 1), "float64")
    out = [
        sg.maximum(x * y, -x) / (y - 1.0),  # float32 all the way; a NaN in either wins the max
        sg.where(x > y, sg.log1p(x), sg.exp(x)) + c,  # promoted to float64 by c
        sg.sqrt(x) - sg.log(y),  # NaN and -inf where NumPy has them
        (x < y) & (x > 0),
    ]
    xs = RNG.normal(size=(64, 40)).astype(np.float32) * 3
    xs[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    ys = RNG.normal(size=40).astype(np.float32)
    ys[:3] = [1.0, np.nan, 0.0]
    f, got, expected = _both([x, y, c], out, [xs, ys, RNG.normal(size=(64, 1))])
    rest = [n for n in f.nodes if not isinstance(n.op, loops.Loop) and n.outputs[0].type.shape == (64, 40)]
    assert _loops(f) and not rest  # every full-sized node is in a loop
    with np.errstate(all="ignore"):  # the float32 term the second output adds c to
        term = np.abs(np.where(xs > ys, np.log1p(xs), np.exp(xs)))
    for g, e, scale in zip(got, expected, [np.abs(expected[0]), term, np.abs(expected[2])]):
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype == np.bool_:
            assert np.array_equal(g, e)
            continue
        assert np.array_equal(np.isnan(g), np.isnan(e)) and np.array_equal(g[np.isinf(e)], e[np.isinf(e)])
        # within two float32 ulps of the float32 operands (exp and log1p here round from float64)
        finite = np.isfinite(e)
        assert np.all(np.abs(g[finite] - e[finite]) <= 2 * np.finfo(np.float32).eps * scale[finite])


def test_a_loop_that_feeds_an_unfused_node_that_feeds_another_loop_runs_in_order():
    x = sg.tensor("x", (50, 40), "float64")
    w = sg.tensor("w", (40, 40), "float64")
    a = sg.exp(x) * 2.0
    b = a @ w  # not a loop member: the second loop reads it
    out = sg.sum((b - a) * x, axis=0)
    f, got, expected = _both([x, w], [out], [RNG.normal(size=(50, 40)), RNG.normal(size=(40, 40))])
    assert len(_loops(f)) == 2
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-13)


def test_sums_along_the_last_axis_and_unknown_extents_stay_numpys():
    x = sg.tensor("x", (50, 40), "float64")
    f = sg.function([x], sg.sum(sg.exp(x) * x, axis=1), backend="numba")
    assert "sum" in [n.op.name for n in f.nodes]  # NumPy's pairwise sum, more accurate than a loop's
    u = sg.tensor("u", (None, 40), "float64")
    g = sg.function([u], sg.exp(u) * u + 1.0, backend="numba")
    assert not _loops(g)  # an extent that may be 1 at run time: the indexing would not know
    values = RNG.normal(size=(3000, 40))
    np.testing.assert_allclose(g(values), np.exp(values) * values + 1.0, rtol=1e-15)


def test_a_float32_sum_over_rows_accumulates_in_float64():
    x = sg.tensor("x", (100000, 2), "float32")
    f = sg.function([x], sg.sum(x * 1.0001, axis=0), backend="numba")
    assert len(_loops(f)) == 1
    values = np.full((100000, 2), 0.1, dtype=np.float32)
    got = f(values)
    exact = (values.astype(np.float64) * np.float32(1.0001).astype(np.float64)).sum(axis=0)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= np.spacing(np.float32(exact)))  # a float32 running sum is 1e-3 off


def test_the_row_stage_keeps_the_edge_rows():
    x = sg.tensor("x", (300, 6), "float64")
    w = sg.tensor("w", (300,), "float64")
    cost = sg.sum(w * sg.logsumexp(x * 1.0, axis=-1))
    outputs = [cost, sg.logsumexp(x * 1.0, axis=-1), sg.grad(cost, x)]
    values = RNG.normal(size=(300, 6)) * 30
    values[0] = -np.inf
    values[1, :2] = np.inf
    values[2, 3] = np.nan
    values[3] = 5.0  # all tied
    values[4] = [0, -1e300, 1e-300, -745, 709, 709]
    weights = RNG.normal(size=300)
    weights[0] = 0.0  # (w · -inf would be NaN: the row's gradient is the point)
    f, got, expected = _both([x, w], outputs, [values, weights])
    assert any(loops.row_op(n) for loop in _loops(f) for n in loop.op.members)
    np.testing.assert_array_equal(got[1][:4], expected[1][:4])  # -inf, +inf, NaN, 5 + log(6) exactly as the body
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-15)
    np.testing.assert_array_equal(got[2][:4], expected[2][:4])  # 0, shares of +inf, NaN, 1/6
    # w·(p/total) as written, p·(w/total) in the loop: two roundings each, each within 2u of
    # the exact value (u = eps/2), so the two within 4u of each other
    np.testing.assert_allclose(got[2], expected[2], rtol=3 * np.finfo(np.float64).eps, atol=1e-300)


@pytest.mark.parametrize("extent", [(3000, 10), (None, None)], ids=["loop", "kernel"])
def test_float32_short_rows_take_float32_lanes_and_keep_each_term_within_ulps(extent):
    """A float32 row's terms run in float32, with x - max's rounding error folded back in:
    without it a term e**-60 would be 60 · 2**-24 off, 30 ulps; with it the softmax is
    within 3 ulps of the float64 one rounded, the edge rows as the body has them.  (`loop`:
    a fused loop of known extents; `kernel`: the row kernels, extents known at run time.)"""

    def lse_and_softmax(x):  # (the softmax as logsumexp's gradient: the kernels' own pass)
        lse = sg.logsumexp(x, axis=-1)
        return [lse, sg.grad(sg.sum(lse), x)]

    x = sg.tensor("x", extent, "float32")
    f = sg.function([x], lse_and_softmax(x), backend="numba")
    values = (RNG.normal(size=(3000, 10)) * 25).astype(np.float32)
    values[0] = -np.inf
    values[1, :2] = np.inf
    values[2, 3] = np.nan
    values[3] = 5.0
    lse, softmax = f(values)
    assert lse.dtype == softmax.dtype == np.float32
    x64 = sg.tensor("x64", extent, "float64")
    exact = sg.function([x64], lse_and_softmax(x64))(values.astype(np.float64))
    np.testing.assert_array_equal(lse[:4], exact[0][:4].astype(np.float32))
    np.testing.assert_array_equal(softmax[:4], exact[1][:4].astype(np.float32))
    normal = np.abs(exact[1][4:]) >= np.finfo(np.float32).tiny
    assert normal.sum() > 15000  # (most entries: the test is about them)
    ulps = np.abs(softmax[4:][normal] - exact[1][4:][normal]) / np.spacing(exact[1][4:][normal].astype(np.float32))
    assert ulps.max() <= 3
    np.testing.assert_allclose(softmax[4:][~normal], exact[1][4:][~normal], rtol=0, atol=np.finfo(np.float32).tiny)
    np.testing.assert_allclose(lse[4:], exact[0][4:], rtol=2 * np.finfo(np.float32).eps)


def test_a_row_stage_whose_logsumexp_only_its_gradient_reads(monkeypatch):
    # found by the fuzzer: the gradient's row op gives a logsumexp and a softmax, and the loop
    # returned only the softmax; its source stored the logsumexp all the same (a KeyError)
    monkeypatch.setattr(loops, "SMALLEST", 1)
    x = sg.tensor("x", (None,), "float64")
    y = sg.log(sg.sum(sg.exp(sg.log(np.ones((2, 3)) + sg.exp(x))), axis=-1, keepdims=True))
    g = sg.grad(sg.sum(y * np.array([[0.5], [1.5]])), x)
    f, got, expected = _both([x], [y, g], [np.array([0.0])])
    assert any(loops.row_op(n) for loop in _loops(f) for n in loop.op.members)
    np.testing.assert_allclose(got[0], np.log(6.0), rtol=1e-15)
    np.testing.assert_allclose(got[1], [1.0], rtol=1e-15)  # 2 · sigmoid(0), the weights summed
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-15)


def test_a_product_loop_runs_as_written_and_exactly_only_where_a_partial_product_left_the_range(monkeypatch):
    """x·y/z² is a Monomial: the loop computes it as written (free of branches, so it
    vectorises) and tests each entry; only a call with an entry that left the range on the
    way, unexplained by its factors, compiles and runs the exact kernel."""
    from stablegrad.backends.numba_backend import loop_source

    sources = []
    monkeypatch.setattr(loop_source, "source", lambda *a, **k: sources.append(k) or source(*a, **k))
    x, y, z = (sg.tensor(name, (2000,), "float64") for name in "xyz")
    inputs, out = [x, y, z], x * y / (z * z)
    f = sg.function(inputs, out, backend="numba")
    (loop,) = _loops(f)
    assert "unexplained = unexplained |" in source(loop.op, speculate=True)
    values = [RNG.normal(size=2000) for _ in range(3)]
    np.testing.assert_array_equal(f(*values), values[0] * values[1] / (values[2] * values[2]))
    assert sources == [{"speculate": True}]  # the exact kernel: not even compiled
    # x·y overflows, z² underflows; 0, inf and NaN that a factor explains; the answer in range
    edges = {1: (1e200, 1e200, 1e200), 2: (1e-200, 1e-200, 1e-200), 3: (0.0, 5.0, 1e-200), 4: (np.inf, 1.0, 1.0)}
    edges |= {5: (np.nan, 1.0, 1.0), 6: (1.0, 1.0, 0.0)}
    for i, (a, b, c) in edges.items():
        values[0][i], values[1][i], values[2][i] = a, b, c
    got = f(*values)
    assert sources[1:] == [{}]  # (the exact kernel, compiled on the first call that needs it)
    np.testing.assert_array_equal(got[1:7], [1.0, 1.0, 0.0, np.inf, np.nan, np.inf])
    np.testing.assert_array_equal(got, sg.function(inputs, out)(*values))
    np.testing.assert_array_equal(got[7:], values[0][7:] * values[1][7:] / (values[2][7:] * values[2][7:]))


def test_the_kernel_and_the_loops_numpy_reference_agree():
    inputs, outputs = _mixture(n=1200)
    values = [RNG.normal(size=1200), RNG.normal(size=5), RNG.normal(size=5), RNG.normal(size=5)]
    f = sg.function(inputs, outputs, backend="numba")
    assert len(_loops(f)) == 1
    reference = sg.function(inputs, outputs, backend="numba")
    by_kernel = f(*values)
    program = reference._program
    program.steps = [  # the same program, the loop run by its `perform`
        (node.op.perform if isinstance(node.op, loops.Loop) else fn, *rest, node) for fn, *rest, node in program.steps
    ]
    program._straight = None
    program._runs = -(10**9)  # (never the generated straight-line version, which has the kernels baked in)
    for g, e in zip(by_kernel, reference(*values)):
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-13 * np.max(np.abs(e)))


@pytest.mark.parametrize("n", [4000, 3000], ids=["short-rows", "long-rows"])
def test_threads_split_the_work_and_leave_the_values_as_one_thread_has_them(n):
    inputs, outputs = _mixture(n=n)
    x = sg.tensor("x2", (40, 3000 if n == 3000 else 5), "float64")  # long rows: the row kernels
    w = sg.tensor("w", (40,), "float64")
    cost2 = sg.sum(w * sg.logsumexp(x * 2.0, axis=-1))
    inputs, outputs = [*inputs, x, w], [*outputs, cost2, sg.grad(cost2, x)]
    values = [RNG.normal(size=n), RNG.normal(size=5), RNG.normal(size=5), RNG.normal(size=5)]
    values += [RNG.normal(size=x.type.shape), RNG.normal(size=40)]
    one = sg.function(inputs, outputs, backend="numba")(*values)
    two = sg.function(inputs, outputs, backend="numba", threads=2)(*values)
    for a, b in zip(one, two):
        # the same sums in the same block order; only LLVM's vector lanes may split a block's
        # sum differently in the threaded code: an ulp or two of the largest entry
        np.testing.assert_allclose(a, b, rtol=0, atol=8 * np.finfo(np.float64).eps * np.max(np.abs(b)))


def test_threads_is_a_numba_option_and_a_positive_count():
    x = sg.tensor("x", (3,), "float64")
    with pytest.raises(sg.StableGradError, match=r"threads= needs backend='numba' \(got backend='numpy'\)"):
        sg.function([x], x * 2, threads=2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(sg.StableGradError, match="threads= must be a positive int"):
            sg.function([x], x * 2, backend="numba", threads=bad)
    with pytest.raises(sg.StableGradError, match="is more than the"):
        sg.function([x], x * 2, backend="numba", threads=10_000)
    np.testing.assert_array_equal(sg.function([x], x * 2, threads=1)(np.ones(3)), 2.0)  # one thread: any backend


def test_a_space_with_more_members_than_a_loop_takes_runs_as_numpy(monkeypatch):
    monkeypatch.setattr(loops, "LARGEST", 20)
    x = sg.tensor("x", (2000,), "float64")
    short, long = x, x
    for _ in range(5):
        short = sg.tanh(short) * 0.9 + 0.1 * x
    for _ in range(30):
        long = sg.tanh(long) * 0.9 + 0.1 * x
    values = RNG.normal(size=2000)
    for y, fused_loops in ((short, 1), (long, 0)):
        f, got, expected = _both([x], [y], [values])
        assert len(_loops(f)) == fused_loops  # (a kernel's compile time grows with its length)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-15)
