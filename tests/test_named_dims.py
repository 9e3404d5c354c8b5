"""Named dimensions: alignment by name, `dim=` reductions, the stable family, gradients,
scan over a named dim, layout by name, DataArray arguments and every error they raise.

The reference for each named graph is the same model written with axes (or NumPy): names
must change nothing but how the user addresses axes.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.errors import InputError, ShapeError

RNG = np.random.default_rng(7)
BACKENDS = ["numpy"] + [b for b in ("jax", "numba") if importlib.util.find_spec(b) is not None]


def named_inputs():
    x = sg.tensor("x", shape=(None, 10), dims=("batch", "class"))
    w = sg.tensor("w", shape=(10,), dims=("class",))
    return x, w


def test_the_issue_example_on_every_backend():
    assert len(BACKENDS) == 3 or importlib.util.find_spec("jax") is None  # CI installs all three
    x, w = named_inputs()
    assert x.dims == ("batch", "class") and sg.vector("v").dims is None
    z = x + w
    lse = sg.logsumexp(z, dim="class")
    p = sg.softmax(z, dim="class")
    zt = z.transpose("class", "batch")
    lse_t = sg.logsumexp(zt, dim="class")
    (gx,) = sg.grad(sg.sum(lse), [x])
    assert (z.dims, lse.dims, p.dims, zt.dims, lse_t.dims, gx.dims) == (
        ("batch", "class"),
        ("batch",),
        ("batch", "class"),
        ("class", "batch"),
        ("batch",),
        ("batch", "class"),
    )
    xp, wp = sg.matrix("xp", shape=(None, 10)), sg.vector("wp", length=10)
    lse_p = sg.logsumexp(xp + wp, axis=1)
    expected = sg.function([xp, wp], [lse_p, sg.softmax(xp + wp, axis=1), sg.grad(sg.sum(lse_p), xp)])
    X, W = RNG.normal(size=(5, 10)) * 400, RNG.normal(size=10)  # past exp's range: the stable path
    want = expected(X, W)
    for backend in BACKENDS:
        got = sg.function([x, w], [lse, p, lse_t, gx], backend=backend)(X, W)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14, err_msg=backend)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13, atol=1e-300, err_msg=backend)
        np.testing.assert_array_equal(got[2], got[0], err_msg=backend)  # a transpose changes nothing
        np.testing.assert_allclose(got[3], want[2], rtol=1e-13, atol=1e-300, err_msg=backend)


# -- alignment ------------------------------------------------------------------------------------
def test_operands_align_by_name_not_position():
    a = sg.tensor("a", shape=(3, 4), dims=("i", "j"))
    b = sg.tensor("b", shape=(4, 3), dims=("j", "i"))
    c = sg.tensor("c", shape=(4,), dims=("j",))
    d = sg.tensor("d", shape=(5,), dims=("k",))
    A, B, C, D = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 3)), RNG.normal(size=4), RNG.normal(size=5)
    f = sg.function([a, b, c, d], [a - b, c * a, a + d, d / c])
    got = f(A, B, C, D)
    np.testing.assert_array_equal(got[0], A - B.T)
    assert (c * a).dims == ("j", "i") and (a + d).dims == ("i", "j", "k") and (d / c).dims == ("k", "j")
    np.testing.assert_array_equal(got[1], C[:, None] * A.T)  # dims ('j', 'i'): c's name comes first
    np.testing.assert_array_equal(got[2], A[:, :, None] + D)
    np.testing.assert_array_equal(got[3], D[:, None] / C)


EXTENTS = {"a": 2, "b": 3, "c": 1, "d": 4}
DIM_LISTS = st.lists(st.sampled_from(sorted(EXTENTS)), unique=True, max_size=4)


def _named(name: str, dims: list[str]):
    return sg.tensor(name, shape=[EXTENTS[d] for d in dims], dims=dims), RNG.normal(size=[EXTENTS[d] for d in dims])


ENTRYWISE_PAIRS = [
    (sg.add, np.add),
    (sg.subtract, np.subtract),
    (sg.multiply, np.multiply),
    (sg.logaddexp, np.logaddexp),
]


@settings(max_examples=60, deadline=None)
@given(DIM_LISTS, DIM_LISTS, st.sampled_from(ENTRYWISE_PAIRS))
def test_alignment_agrees_with_xarray(dims_a, dims_b, ops):
    xr = pytest.importorskip("xarray")
    (a, A), (b, B) = _named("a", dims_a), _named("b", dims_b)
    ours, numpy_op = ops
    y = ours(a, b)
    expected = xr.apply_ufunc(numpy_op, xr.DataArray(A, dims=dims_a), xr.DataArray(B, dims=dims_b))
    assert sorted(y.dims) == sorted(expected.dims)
    # (logaddexp: ours and NumPy's round differently, a few ulp of 1 where the result is near 0)
    np.testing.assert_allclose(sg.function([a, b], y)(A, B), expected.transpose(*y.dims).values, rtol=1e-15, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(st.permutations(sorted(EXTENTS)), st.sampled_from(sorted(EXTENTS)), st.booleans())
def test_a_reduction_by_name_does_not_depend_on_the_layout(order, dim, keepdims):
    xr = pytest.importorskip("xarray")
    special = pytest.importorskip("scipy.special")
    x, X = _named("x", sorted(EXTENTS))
    y = sg.logsumexp(x.transpose(*order), dim=dim, keepdims=keepdims)
    got = sg.function([x], y)(X * 300)
    reference = xr.DataArray(X * 300, dims=sorted(EXTENTS)).reduce(special.logsumexp, dim=dim)
    if keepdims:
        reference = reference.expand_dims(dim)
    np.testing.assert_allclose(got, reference.transpose(*y.dims).values, rtol=1e-15)


def test_unnamed_operands_broadcast_by_position_where_that_is_unambiguous():
    a = sg.tensor("a", shape=(3, 4), dims=("i", "j"))
    assert (a * 2.0).dims == ("i", "j")
    row = np.arange(4.0)
    np.testing.assert_array_equal(sg.function([a], a + row)(np.ones((3, 4))), np.ones((3, 4)) + row)
    assert (a + row).dims == ("i", "j")
    assert sg.where(a > 0, a, 0.0).dims == ("i", "j")
    assert a.astype("float32").dims == ("i", "j")


def test_an_ambiguous_unnamed_operand_is_an_error():
    a = sg.tensor("a", shape=(3, 4), dims=("i", "j"))
    b = sg.tensor("b", shape=(4,), dims=("j",))
    with pytest.raises(ShapeError, match=r"where: an unnamed operand of shape \(4,\).*different dims.*test_named_dims"):
        sg.where(sg.vector("m", length=4) > 0, a, b)
    with pytest.raises(ShapeError, match=r"clip: .*different dims"):
        sg.clip(b, a, np.ones(4))
    with pytest.raises(ShapeError, match="would add unnamed axes"):
        a + np.ones((2, 3, 4))


def test_conflicting_extents_of_one_name_are_an_error():
    a = sg.tensor("a", shape=(3, 4), dims=("i", "j"))
    b = sg.tensor("b", shape=(5,), dims=("j",))
    with pytest.raises(ShapeError, match="multiply: dim 'j' has extents 4 and 5"):
        a * b
    # an extent of 1 broadcasts, as keepdims results need
    m = sg.max(a, dim="j", keepdims=True)
    assert m.dims == ("i", "j") and (a - m).dims == ("i", "j")


UNARY_STABLE = [sg.softplus, sg.sigmoid, sg.log_sigmoid, sg.logit, sg.log1mexp, sg.log_erfc, sg.log_ndtr, sg.xexpx]
BINARY_STABLE = [sg.logaddexp, sg.logdiffexp, sg.xlogy, sg.xlog1py]


@pytest.mark.parametrize("fn", UNARY_STABLE + BINARY_STABLE, ids=lambda f: f.__name__)
def test_the_entrywise_stable_family_aligns_by_name(fn):
    a = sg.tensor("a", shape=(3, 4), dims=("i", "j"))
    b = sg.tensor("b", shape=(4, 3), dims=("j", "i"))
    A, B = -RNG.uniform(0.1, 3, size=(3, 4)), -RNG.uniform(3, 6, size=(4, 3))  # logdiffexp: a > b
    if fn in (sg.logit, sg.xlogy, sg.xlog1py):
        A, B = -A / 4, -B / 7  # probabilities, and positive y
    y = fn(a, b) if fn in BINARY_STABLE else fn(a)
    assert y.dims == ("i", "j")
    got = sg.function([a, b], y)(A, B)
    p, q = sg.matrix("p", shape=(3, 4)), sg.matrix("q", shape=(3, 4))
    want = sg.function([p, q], fn(p, q) if fn in BINARY_STABLE else fn(p))(A, B.T)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all()


def test_compiling_in_another_thread_leaves_names_on_here():
    import threading

    x, w = named_inputs()
    inside, release = threading.Event(), threading.Event()

    def slow_library_code():
        with sg.graph.names.positional():
            inside.set()
            release.wait(5)

    worker = threading.Thread(target=slow_library_code)
    worker.start()
    inside.wait(5)
    try:
        assert (w + x).dims == ("class", "batch")  # aligned, though the other thread is positional
    finally:
        release.set()
        worker.join()


def test_tensor_dims_are_checked():
    with pytest.raises(ShapeError, match=r"tensor: 1 dims \('a',\) for an array of 2 dimensions"):
        sg.tensor("x", shape=(2, 3), dims=("a",))
    with pytest.raises(ShapeError, match="repeated dim"):
        sg.tensor("x", shape=(2, 3), dims=("a", "a"))
    with pytest.raises(ShapeError, match="dims must be strings"):
        sg.tensor("x", shape=(2,), dims=(0,))
    assert sg.tensor("x", shape=(2,), dims="a").dims == ("a",)


# -- reductions and the stable family ---------------------------------------------------------------
REDUCTIONS = [sg.sum, sg.prod, sg.max, sg.min, sg.mean, sg.var, sg.std, sg.median, sg.logsumexp, sg.logmeanexp]


@pytest.mark.parametrize("reduce", REDUCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_take_dim_as_they_take_axis(reduce, keepdims):
    x = sg.tensor("x", shape=(2, 3, 4), dims=("a", "b", "c"))
    X = RNG.normal(size=(2, 3, 4))
    named = [reduce(x, dim="b", keepdims=keepdims), reduce(x, dim=("c", "a"), keepdims=keepdims)]
    positional = [reduce(x, axis=1, keepdims=keepdims), reduce(x, axis=(0, 2), keepdims=keepdims)]
    assert named[0].dims == (("a", "b", "c") if keepdims else ("a", "c"))
    assert named[1].dims == (("a", "b", "c") if keepdims else ("b",))
    got, want = sg.function([x], named)(X), sg.function([x], positional)(X)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_reductions_over_positional_axes_of_a_named_tensor_keep_the_other_names():
    x = sg.tensor("x", shape=(2, 3), dims=("a", "b"))
    assert sg.sum(x, axis=0).dims == ("b",)
    assert sg.sum(x).dims == ()
    assert x.sum(dim="a").dims == ("b",) and x.max(dim="b").dims == ("a",)
    assert sg.argmax(x, dim="b").dims == ("a",)
    assert sg.cumsum(x, dim="a").dims == ("a", "b")
    assert sg.cumsum(x).dims is None  # flattened: no axis left to name
    assert sg.linalg.norm(x, dim="b").dims == ("a",)


@pytest.mark.parametrize(
    "fn",
    [sg.softmax, sg.log_softmax, sg.logcumsumexp, sg.cumsum, sg.sort, sg.argsort],
    ids=lambda f: f.__name__,
)
def test_functions_along_an_axis_take_dim_and_keep_the_names(fn):
    x = sg.tensor("x", shape=(3, 5), dims=("batch", "class"))
    X = RNG.normal(size=(3, 5)) * 300
    y = fn(x, dim="class")
    assert y.dims == ("batch", "class")
    yt = fn(x.transpose("class", "batch"), dim="class")
    assert yt.dims == ("class", "batch")
    got, got_t, want = sg.function([x], [y, yt, fn(x, axis=1)])(X)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_t, want.T)


def test_logsumexp_weights_and_sign_and_cross_entropy_by_name():
    x = sg.tensor("x", shape=(3, 4), dims=("batch", "class"))
    b = sg.tensor("b", shape=(3, 4), dims=("batch", "class"))
    value, sign = sg.logsumexp(x, dim="class", b=b, return_sign=True)
    assert value.dims == sign.dims == ("batch",)
    labels = sg.tensor("y", shape=(3,), dtype="int64", dims=("batch",))
    ce = sg.softmax_cross_entropy(x, labels, dim="class")
    assert ce.dims == ("batch",)
    X, B, Y = RNG.normal(size=(3, 4)) * 500, RNG.normal(size=(3, 4)), np.array([0, 3, 1])
    f = sg.function([x, b, labels], [value, sign, ce])
    want_v, want_s = sg.function([x, b], list(sg.logsumexp(x, axis=1, b=b, return_sign=True)))(X, B)
    got = f(X, B, Y)
    np.testing.assert_array_equal(got[0], want_v)
    np.testing.assert_array_equal(got[1], want_s)
    np.testing.assert_array_equal(got[2], sg.function([x, labels], sg.softmax_cross_entropy(x, labels, axis=1))(X, Y))


def test_dim_errors_name_the_function_the_dims_and_the_line():
    x, _ = named_inputs()
    with pytest.raises(
        ShapeError, match=r"logsumexp: no dim 'clas' in \('batch', 'class'\) \(at test_named_dims.py:\d+\)"
    ):
        sg.logsumexp(x, dim="clas")
    with pytest.raises(ShapeError, match="softmax: give axis= or dim=, not both"):
        sg.softmax(x, axis=1, dim="class")
    with pytest.raises(ShapeError, match="sum: dim='a' needs named dims, and the tensor has none"):
        sg.sum(sg.vector("v"), dim="a")
    with pytest.raises(ShapeError, match="mean: repeated dim"):
        sg.mean(x, dim=("class", "class"))
    with pytest.raises(ShapeError, match="must be a name or a tuple of names"):
        sg.max(x, dim=1)


def test_recognition_sees_the_same_graph_with_names():
    x, w = named_inputs()
    naive = sg.log(sg.sum(sg.exp(x + w), dim="class"))
    text = sg.explain(naive)
    assert "logsumexp_from_naive" in text and "dim='class'" in text
    g = sg.grad(sg.sum(naive), x)
    X = RNG.normal(size=(4, 10)) * 800
    value, grad = sg.function([x, w], [naive, g])(X, np.zeros(10))
    np.testing.assert_allclose(value, sg.function([x], sg.logsumexp(x, dim="class"))(X), rtol=1e-15)
    assert np.isfinite(grad).all() and np.allclose(grad.sum(axis=1), 1.0)
    # the compiled graph is the positional one: the same nodes as the model written with axes
    xp, wp = sg.matrix("x", shape=(None, 10)), sg.vector("w", length=10)
    positional = sg.log(sg.sum(sg.exp(xp + sg.expand_dims(wp, 0)), axis=1))
    ops = [n.op for n in sg.function([x, w], naive).nodes]
    assert ops == [n.op for n in sg.function([xp, wp], positional).nodes]


# -- gradients -------------------------------------------------------------------------------------
def test_first_and_second_derivatives_equal_the_positional_ones():
    x, w = named_inputs()
    cost = sg.sum(sg.logsumexp(x * w, dim="class") ** 2)
    gx, gw = sg.grad(cost, [x, w])
    assert gx.dims == ("batch", "class") and gw.dims == ("class",)
    hw = sg.hessian_vector_product(cost, w, sg.ones(10))
    assert hw.dims == ("class",)
    ggx = sg.grad(sg.sum(gx * gx), x)
    assert ggx.dims == ("batch", "class")
    xp, wp = sg.matrix("xp", shape=(None, 10)), sg.vector("wp", length=10)
    cost_p = sg.sum(sg.logsumexp(xp * wp, axis=1) ** 2)
    gxp, gwp = sg.grad(cost_p, [xp, wp])
    X, W = RNG.normal(size=(6, 10)) * 30, RNG.normal(size=10)
    got = sg.function([x, w], [gx, gw, hw, ggx])(X, W)
    want = sg.function(
        [xp, wp], [gxp, gwp, sg.hessian_vector_product(cost_p, wp, sg.ones(10)), sg.grad(sg.sum(gxp * gxp), xp)]
    )(X, W)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-13, atol=1e-300)
    # and against central differences of the value, in w
    f = sg.function([x, w], cost)
    h = 1e-6
    fd = [(f(X, W + h * e) - f(X, W - h * e)) / (2 * h) for e in np.eye(10)]
    np.testing.assert_allclose(got[1], fd, rtol=1e-6, atol=1e-5)  # (the cost is ~1e4: fd's rounding)


def test_a_gradient_that_is_a_value_the_user_holds_is_copied_not_renamed():
    x = sg.tensor("x", shape=(3,), dims=("i",))
    u = sg.vector("u", length=3)
    v = sg.exp(u)  # unnamed, held by the user
    g = sg.grad(sg.sum(x * v), x)  # the gradient of x·v in x is v itself
    assert g.dims == ("i",) and v.dims is None


def test_jvp_keeps_the_outputs_names():
    x, w = named_inputs()
    y = sg.softmax(x + w, dim="class")
    t = sg.jvp(y, x, sg.ones_like(x))
    assert t.dims == ("batch", "class")
    np.testing.assert_allclose(sg.function([x, w], t)(RNG.normal(size=(2, 10)), np.zeros(10)), 0.0, atol=1e-15)


# -- scan over a named dim ---------------------------------------------------------------------------
def hmm_named(T, K):
    log_trans = sg.tensor("log_trans", shape=(K, K), dims=("from", "state"))
    log_emit = sg.tensor("log_emit", shape=(T, K), dims=("time", "state"))
    log_init = sg.tensor("log_init", shape=(K,), dims=("state",))

    def step(alpha, emit):  # alpha: ('state',) of the previous step, which is 'from' here
        return sg.logsumexp(alpha.rename({"state": "from"}) + log_trans, dim="from") + emit, alpha

    first = log_init + log_emit.isel(time=0)
    last, history = sg.scan(step, first, log_emit.isel(time=slice(1, None)), dim="time")
    return [log_trans, log_emit, log_init], sg.logsumexp(last, dim="state"), history


def hmm_positional(T, K):
    log_trans, log_emit, log_init = sg.matrix("a", shape=(K, K)), sg.matrix("e", shape=(T, K)), sg.vector("i", length=K)

    def step(alpha, emit):
        return sg.logsumexp(alpha[:, None] + log_trans, axis=0) + emit, alpha

    last, history = sg.scan(step, log_init + log_emit[0], log_emit[1:])
    return [log_trans, log_emit, log_init], sg.logsumexp(last), history


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_named_hmm_equals_the_positional_one(backend):
    T, K = 400, 4
    inputs, ll, history = hmm_named(T, K)
    assert ll.dims == () and history.dims == ("time", "state")
    grads = sg.grad(ll, inputs)
    assert [g.dims for g in grads] == [v.dims for v in inputs]
    inputs_p, ll_p, _ = hmm_positional(T, K)
    A = np.log(RNG.dirichlet(np.ones(K), K))
    E = RNG.normal(size=(T, K)) * 40  # emissions far apart: naive probabilities would underflow
    I = np.log(np.full(K, 1 / K))
    got = sg.function(inputs, [ll, *grads], backend=backend)(A, E, I)
    want = sg.function(inputs_p, [ll_p, *sg.grad(ll_p, inputs_p)], backend=backend)(A, E, I)
    for g, w in zip(got, want):  # (the graphs differ in layout ops: fused kernels may round differently)
        np.testing.assert_allclose(g, w, rtol=1e-14)
    assert np.isfinite(got[0]) and all(np.isfinite(g).all() for g in got[1:])


def test_scan_loops_over_a_dim_that_does_not_lead():
    T, K = 30, 3
    (log_trans, log_emit, log_init), ll, _ = hmm_named(T, K)
    emit_sk = sg.tensor("emit_sk", shape=(K, T), dims=("state", "time"))

    def step(alpha, emit):
        return sg.logsumexp(alpha.rename({"state": "from"}) + log_trans, dim="from") + emit, None

    last, _ = sg.scan(step, log_init + emit_sk.isel(time=0), emit_sk.isel(time=slice(1, None)), dim="time")
    A, E, I = np.log(RNG.dirichlet(np.ones(K), K)), RNG.normal(size=(T, K)), np.zeros(K)
    got = sg.function([log_trans, emit_sk, log_init], sg.logsumexp(last, dim="state"))(A, E.T, I)
    np.testing.assert_array_equal(got, sg.function([log_trans, log_emit, log_init], ll)(A, E, I))


def test_a_carry_that_comes_back_transposed_is_laid_out_as_init():
    c0 = sg.tensor("c0", shape=(2, 3), dims=("a", "b"))
    xs = sg.tensor("xs", shape=(5, 3, 2), dims=("t", "b", "a"))
    last, ys = sg.scan(lambda c, x: (x + c, c), c0, xs)  # x + c has dims ('b', 'a')
    assert last.dims == ("a", "b") and ys.dims == ("t", "a", "b")
    C, X = RNG.normal(size=(2, 3)), RNG.normal(size=(5, 3, 2))
    expected = C.copy()
    for x_t in X:  # (step by step, as the loop adds: a sum in another order cancels differently)
        expected = x_t.T + expected
    np.testing.assert_allclose(sg.function([c0, xs], last)(C, X), expected, rtol=1e-14)
    with pytest.raises(sg.StableGradError, match=r"scan: dims \('a', 'c'\) where \('a', 'b'\) were expected"):
        sg.scan(lambda c, x: (c.rename({"b": "c"}), None), c0, xs)
    with pytest.raises(ShapeError, match=r"scan \(a stacked output\): repeated dim in \('t', 't', 'a'\)"):
        sg.scan(lambda c, x: (c, x.rename({"b": "t"})), c0, xs)
    assert sg.scan(lambda c, x: (c, sg.sum(x)), c0, xs)[1].dims == ("t",)
    with pytest.raises(ShapeError, match="scan: no dim 'time'"):
        sg.scan(lambda c, x: (c, None), c0, xs, dim="time")


# -- layout by name ------------------------------------------------------------------------------
def test_rename_transpose_expand_dims_and_isel():
    x = sg.tensor("x", shape=(2, 3, 4), dims=("a", "b", "c"))
    X = RNG.normal(size=(2, 3, 4))
    assert x.rename({"a": "n"}).dims == ("n", "b", "c") and x.rename(b="m").dims == ("a", "m", "c")
    assert x.dims == ("a", "b", "c")  # renaming makes a new variable
    assert sg.matrix("m").rename(("r", "s")).dims == ("r", "s")
    assert x.transpose("c", "a", "b").dims == ("c", "a", "b")
    assert x.expand_dims("new").dims == ("new", "a", "b", "c") and x.expand_dims("z", axis=-1).dims[-1] == "z"
    picked = [x.isel(b=1), x.isel(c=slice(1, 3)), x.isel({"a": 0, "c": np.array([3, 0])})]
    assert [p.dims for p in picked] == [("a", "c"), ("a", "b", "c"), ("b", "c")]
    outs = [x.transpose("c", "a", "b"), x.expand_dims("z", axis=1), *picked]
    got = sg.function([x], outs)(X)
    for g, w in zip(got, [X.transpose(2, 0, 1), X[:, None], X[:, 1], X[:, :, 1:3], X[0][:, [3, 0]]]):
        np.testing.assert_array_equal(g, w)


def test_layout_errors():
    x = sg.tensor("x", shape=(2, 3), dims=("a", "b"))
    with pytest.raises(ShapeError, match=r"transpose: \('a',\) is not an order of the dims"):
        x.transpose("a")
    with pytest.raises(ShapeError, match="rename: no dim 'q'"):
        x.rename(q="r")
    with pytest.raises(ShapeError, match="rename: repeated dim"):
        x.rename(a="b")
    with pytest.raises(ShapeError, match="expand_dims: dim 'a' is already in"):
        x.expand_dims("a")
    with pytest.raises(ShapeError, match="isel: no dim 'c'"):
        x.isel(c=0)
    with pytest.raises(ShapeError, match="isel: the tensor has no named dims"):
        sg.matrix("m").isel(a=0)
    with pytest.raises(ShapeError, match="1-d integer array"):
        x.isel(a=np.zeros((2, 2), dtype=int))


def test_dot_contracts_a_named_dim():
    x = sg.tensor("x", shape=(5, 3), dims=("batch", "k"))
    w = sg.tensor("w", shape=(3, 2), dims=("k", "out"))
    b = sg.tensor("b", shape=(2, 3), dims=("out", "k"))
    y, z = sg.dot(x, w, dim="k"), sg.dot(x, b, dim="k")
    assert y.dims == z.dims == ("batch", "out")
    X, W = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 2))
    got = sg.function([x, w, b], [y, z, sg.grad(sg.sum(y), w)])(X, W, W.T)
    np.testing.assert_allclose(got[0], X @ W, rtol=1e-14)
    np.testing.assert_allclose(got[1], X @ W, rtol=1e-14)
    np.testing.assert_allclose(got[2], X.sum(axis=0)[:, None] * np.ones((3, 2)), rtol=1e-14)
    assert sg.dot(sg.matrix("p"), sg.matrix("q")).dims is None  # positional dot as before
    with pytest.raises(ShapeError, match="dot: dim 'k' has extents 3 and 4"):
        sg.dot(x, sg.tensor("v", shape=(4,), dims=("k",)), dim="k")
    with pytest.raises(ShapeError, match="dot: no dim 'j'"):
        sg.dot(x, w, dim="j")


def test_printing_shows_the_names():
    x, w = named_inputs()
    assert repr(x) == "<x: float64[batch=?, class=10]>"
    text = sg.graph.printing.listing(sg.sum(x + w, dim="class"))
    assert "sum(%1, dim='class')  : float64[batch=?]" in text


# -- compiled functions and xarray -------------------------------------------------------------------
def test_dataarray_arguments_are_matched_by_name_and_outputs_can_be_dataarrays():
    xr = pytest.importorskip("xarray")
    x, w = named_inputs()
    lse = sg.logsumexp(x + w, dim="class")
    f = sg.function([x, w], [lse, x + w], xarray=True)
    X, W = RNG.normal(size=(3, 10)), RNG.normal(size=10)
    value, total = f(xr.DataArray(X.T, dims=("class", "batch")), W)
    assert isinstance(value, xr.DataArray) and value.dims == ("batch",)
    assert total.dims == ("batch", "class")
    np.testing.assert_array_equal(value.values, sg.function([x, w], lse)(X, W))
    with pytest.raises(
        InputError, match=r"argument 0 \('x'\) has dims \('batch', 'class'\); the DataArray given has \('a', 'b'\)"
    ):
        f(xr.DataArray(X, dims=("a", "b")), W)
    plain = sg.function([x, w], lse)(xr.DataArray(X, dims=("batch", "class")), W)
    assert type(plain) is np.ndarray


def test_xarray_outputs_need_xarray(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_xarray(name, *args, **kwargs):
        if name == "xarray":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xarray)
    x, _ = named_inputs()
    with pytest.raises(InputError, match=r"xarray=True returns xarray\.DataArray outputs; install xarray"):
        sg.function([x], sg.sum(x, dim="class"), xarray=True)
