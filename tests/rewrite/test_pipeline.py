"""The pipeline end to end: composites, late inlining, recognise-before-grad, explain."""

import inspect
import time

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.backends.numpy_fused import FUSED
from stablegrad.graph.basic import Constant, toposort
from stablegrad.ops.composite import OpFromGraph, SymbolicOp
from stablegrad.ops.stable import LogSumExp
from stablegrad.rewrite.pipeline import optimize

rng = np.random.default_rng(11)


def _op_types(f):
    return {type(n.op) for n in f.nodes}


def _inlined_op_types(inputs, outputs):
    """Op classes after the whole pipeline with every composite inlined (no backend keeps any whole)."""
    return {type(n.op) for n in toposort(optimize(outputs, inputs, keep_whole=None))}


def _naive_softmax(z):
    e = sg.exp(z)
    return e / sg.sum(e, axis=-1, keepdims=True)


def test_naive_softmax_inside_a_composite_is_repaired_value_and_gradient():
    z = sg.vector("z")
    composite = OpFromGraph([z], [_naive_softmax(z)])
    x = sg.vector("x")
    y = composite(x)
    g = sg.grad(y[0], x)
    value, grad = sg.function([x], [y, g])(np.array([1000.0, 999.0, 998.0]))
    expected = np.exp([0.0, -1.0, -2.0]) / np.exp([0.0, -1.0, -2.0]).sum()
    np.testing.assert_allclose(value, expected, rtol=1e-14)
    np.testing.assert_allclose(grad, expected[0] * (np.eye(3)[0] - expected), rtol=1e-13, atol=1e-16)


def test_nested_composites_are_recognised_and_inlined():
    z = sg.vector("z")
    inner = OpFromGraph([z], [sg.log(sg.sum(sg.exp(z)))])
    w = sg.vector("w")
    outer = OpFromGraph([w], [inner(w) * 2.0])
    x = sg.vector("x")
    cost = outer(x)
    outputs = [cost, sg.grad(cost, x)]
    f = sg.function([x], outputs)
    value, grad = f(np.array([1000.0, 1000.0]))
    np.testing.assert_allclose(value, 2 * (1000.0 + np.log(2.0)))
    np.testing.assert_allclose(grad, [1.0, 1.0])
    assert not any(issubclass(t, OpFromGraph) for t in _op_types(f))
    assert not any(issubclass(t, OpFromGraph | SymbolicOp) for t in _inlined_op_types([x], outputs))
    assert any("logsumexp_from_naive" in line for line in f.explain().splitlines())


def test_a_symbolic_op_body_is_not_recognised_again_and_compiling_terminates():
    x = sg.matrix("x")
    outputs = [sg.logsumexp(x, axis=1), sg.grad(sg.sum(sg.logsumexp(x, axis=1)), x)]
    start = time.perf_counter()
    f = sg.function([x], outputs)
    assert time.perf_counter() - start < 5.0
    assert not any(c.rule == "logsumexp_from_naive" for c in f.changes.changes)
    assert LogSumExp not in _inlined_op_types([x], outputs)  # inlined once, and not re-recognised


@pytest.mark.parametrize(
    "build",
    [
        lambda x: sg.logsumexp(x, axis=1),
        lambda x: sg.softmax(x),
        lambda x: sg.log_softmax(x),
        lambda x: sg.logaddexp(x, 2 * x),
        lambda x: sg.softplus(x),
        lambda x: sg.log_sigmoid(x),
        lambda x: sg.log1mexp(-sg.abs(x)),
        lambda x: sg.logsumexp(x, axis=1, b=x),
    ],
)
def test_compiled_stable_ops_leave_no_composite_after_specialize(build):
    x = sg.matrix("x")
    y = build(x)
    outputs = [y, sg.grad(sg.sum(y), x)]
    assert not any(issubclass(t, OpFromGraph | SymbolicOp) for t in _inlined_op_types([x], outputs))
    # the NumPy backend keeps only what it has a bit-for-bit fused implementation of
    kept = {t for t in _op_types(sg.function([x], outputs)) if issubclass(t, SymbolicOp)}
    assert kept <= set(FUSED)


def test_grad_recognises_before_differentiating():
    x = sg.vector("x")
    cost = sg.log(sg.sum(sg.exp(x)))
    g = sg.function([x], sg.grad(cost, x))(np.array([1000.0, 0.0]))
    np.testing.assert_allclose(g, [1.0, np.exp(-1000.0)])
    with np.errstate(all="ignore"):
        naive = sg.function([x], sg.grad(cost, x, recognition=False), recognition=False)(np.array([1000.0, 0.0]))
    assert np.isnan(naive).any()  # what recognising first saves us from


# -- one graph, one meaning: every path computes the same formula ------------------------------------
BIG = np.array([1000.0, 1001.0])


def test_eval_of_a_constant_graph_is_recognised_as_function_is():
    naive = sg.log(sg.sum(sg.exp(sg.constant(BIG))))
    np.testing.assert_allclose(naive.eval(), np.log(np.exp(0.0) + np.exp(1.0)) + 1000.0, rtol=1e-15)
    np.testing.assert_array_equal(naive.eval(), sg.function([], naive)())


def test_without_recognition_a_gradient_is_taken_of_the_formula_as_written():
    x = sg.vector("x")
    cost = sg.log(sg.sum(sg.exp(x)))
    g = sg.grad(cost, x)  # taken of logsumexp
    np.testing.assert_allclose(sg.function([x], g)(BIG), [1 / (1 + np.e), np.e / (1 + np.e)], rtol=1e-15)
    with np.errstate(all="ignore"):
        written = sg.function([x], g, recognition=False)(BIG)
        by_hand = sg.function([x], sg.grad(cost, x, recognition=False), recognition=False)(BIG)
    assert np.isnan(written).all()  # exp(x) / sum(exp(x)) = inf / inf, as written
    np.testing.assert_array_equal(written, by_hand)


def test_without_recognition_second_derivatives_are_of_the_formula_as_written():
    x = sg.vector("x")
    cost = sg.log(sg.sum(sg.exp(x)))
    hv = sg.hessian_vector_product(cost, x, np.array([1.0, -1.0]))
    p = 1 / (1 + np.e)
    np.testing.assert_allclose(sg.function([x], hv)(BIG), [2 * p * (1 - p), -2 * p * (1 - p)], rtol=1e-14)
    with np.errstate(all="ignore"):
        assert np.isnan(sg.function([x], hv, recognition=False)(BIG)).all()


def test_a_gradient_that_is_a_forward_value_is_marked_on_a_copy():
    x, w = sg.scalar("x"), sg.scalar("w")
    s = sg.exp(w)
    g = sg.grad(sg.log(sg.exp(x)) * s, x)  # recognised: x * s, whose gradient is s itself
    assert g is not s and s.derivation is None
    with np.errstate(all="ignore"):
        value, written = sg.function([x, w], [s, g], recognition=False)(1000.0, 0.5)
    assert value == np.exp(0.5)  # the forward formula keeps its meaning
    assert np.isnan(written)  # s * exp(x) / exp(x) = s * inf / inf, as written


def test_a_loop_body_means_the_same_on_every_path():
    x0, xs = sg.vector("x0"), sg.tensor("xs", shape=(None, 2, 2))

    def step(carry, x):
        return sg.log(sg.sum(sg.exp(carry[:, None] + x), axis=0)), None

    final, _ = sg.scan(step, x0, xs)
    cost = sg.sum(final)
    g = sg.grad(cost, x0)
    args = (np.array([500.0, 510.0]), np.full((3, 2, 2), 100.0))
    value, grad_ = sg.function([x0, xs], [cost, g])(*args)
    assert np.isfinite(value) and np.all(np.isfinite(grad_))
    with np.errstate(all="ignore"):
        raw_value, raw_grad = sg.function([x0, xs], [cost, g], recognition=False)(*args)
    assert not np.isfinite(raw_value) and not np.all(np.isfinite(raw_grad))


def test_explain_lists_the_rewrites_a_gradient_was_taken_through():
    x = sg.vector("x")
    g = sg.grad(sg.log(sg.sum(sg.exp(x))), x)
    assert "[logsumexp_from_naive]" in sg.explain(g)
    assert "[logsumexp_from_naive]" in sg.function([x], g).explain()
    assert "[logsumexp_from_naive]" in sg.explain(sg.hessian_vector_product(sg.log(sg.sum(sg.exp(x))), x, x))
    plain = sg.grad(sg.sum(x**2), x)
    assert plain.derivation is None and "logsumexp" not in sg.explain(plain)


def test_grad_with_respect_to_an_intermediate_keeps_it():
    x = sg.vector("x")
    e = sg.exp(x)
    cost = sg.log(sg.sum(e))
    g = sg.grad(cost, e)  # recognition must not rewrite e away
    np.testing.assert_allclose(sg.function([x], g)(np.zeros(2)), [0.5, 0.5])


def test_explain_names_the_users_line_and_the_rewrite():
    x = sg.matrix("x")
    y = sg.log(sg.sum(sg.exp(x), axis=1))
    line = inspect.currentframe().f_lineno - 1
    f = sg.function([x], y)
    text = f.explain()
    assert f"test_pipeline.py:{line}  log(sum(exp(x), axis=1))  →  logsumexp(x, axis=1)" in text
    assert sg.explain(y) == text


def test_a_chain_of_rewrites_keeps_the_users_line_throughout():
    x = sg.vector("x")
    y = sg.sum(sg.log(1 + sg.exp(x)))
    line = inspect.currentframe().f_lineno - 1
    # log(1 + exp) → log1p(exp) → softplus: the middle node is built by a rule, far from the user's code
    text = sg.function([x], [y, sg.grad(y, x)]).explain()
    assert "[log1p_from_naive]" in text and "[softplus_from_log1p_exp]" in text
    assert all(entry.startswith(f"test_pipeline.py:{line}  ") for entry in text.splitlines()), text


def test_dprint_prints_every_node_of_a_graph_or_of_a_compiled_function(capsys):
    x = sg.vector("x")
    y = sg.log1p(sg.exp(x)) * 2.0
    assert sg.dprint(y) is None
    printed = capsys.readouterr().out
    sg.dprint(sg.function([x], y))  # the graph it runs: softplus, inlined as max(x, 0) + log1p(exp(-|x|))
    compiled = capsys.readouterr().out
    assert "= maximum(x, 0.0)" in compiled and "= exp(x)" not in compiled
    assert printed.splitlines() == [
        "%0 = exp(x)  : float64[?]",
        "%1 = log1p(%0)  : float64[?]",
        "%2 = multiply(%1, 2.0)  : float64[?]",
    ]


@pytest.mark.parametrize("dtype", ["int64", "float16", "float32"])
def test_integer_and_low_precision_graphs_compile_as_fast_as_float64(dtype):
    def compile_seconds(dt):
        x = sg.matrix("x", dtype=dt)
        start = time.perf_counter()
        sg.function([x], [sg.logsumexp(x, axis=1), sg.log_softmax(x), sg.logaddexp(x, x)])
        return time.perf_counter() - start

    compile_seconds("float64")
    assert compile_seconds(dtype) < 5 * compile_seconds("float64") + 0.05


@pytest.mark.parametrize(
    ("x_shape", "y_shape"),
    [((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 3, 1)), ((3, 4), ()), ((3, 4), (1, 1))],
)
def test_with_static_shapes_the_sums_undoing_broadcasting_are_plain_sums(x_shape, y_shape):
    x, y = sg.tensor("x", shape=x_shape), sg.tensor("y", shape=y_shape)
    gx, gy = sg.grad(sg.sum(sg.sin(x * y)), [x, y])
    f = sg.function([x, y], [gx, gy])
    names = [n.op.name for n in f.nodes]
    assert "reduce_to" not in names and "squeeze" not in names  # squeeze(sum(keepdims)) is one sum
    x_value, y_value = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    got_x, got_y = f(x_value, y_value)
    expected_y = (np.cos(x_value * y_value) * x_value).sum(axis=tuple(range(len(x_shape) - len(y_shape))))
    expected_y = expected_y.sum(axis=tuple(i for i, n in enumerate(y_shape) if n == 1), keepdims=True)
    assert got_y.shape == y_shape
    np.testing.assert_allclose(got_y, expected_y.reshape(y_shape), rtol=1e-12)
    np.testing.assert_allclose(got_x, np.cos(x_value * y_value) * y_value, rtol=1e-12)


@pytest.mark.parametrize("recognition", [True, False])
def test_a_gradients_seed_of_ones_is_the_number_one_not_an_array(recognition):
    """The pullback of sum broadcasts its seed to the data's shape; as an operand of a
    product that the other operand already gives that shape, it is the number 1."""
    x, mu = sg.tensor("x", (5000, 3)), sg.tensor("mu", (3,))
    z = (x - mu) * 2.0
    (g,) = sg.grad(sg.sum(sg.logsumexp(-0.5 * z * z, axis=1)), [mu])
    f = sg.function([x, mu], g, recognition=recognition)
    assert not {"broadcast_to", "expand_dims"} & {n.op.name for n in f.nodes}
    ones = [
        n for n in f.nodes if n.op.name == "multiply" and any(isinstance(v, Constant) and v.data == 1 for v in n.inputs)
    ]
    assert ones == []  # (a product by the seed: its other operand)
    x_value, mu_value = rng.standard_normal((5000, 3)), rng.standard_normal(3)
    lp = -2.0 * (x_value - mu_value) ** 2
    p = np.exp(lp - lp.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(f(x_value, mu_value), (4.0 * (x_value - mu_value) * p).sum(axis=0), rtol=1e-10)


def test_a_fill_that_sets_the_results_shape_stays():
    y = sg.tensor("y", (3,))
    ones = sg.broadcast_to(sg.exp(sg.zeros(())), (5000, 3))  # (not folded: computed)
    f = sg.function([y], ones * y)
    assert f(np.arange(3.0)).shape == (5000, 3)
    np.testing.assert_array_equal(f(np.arange(3.0)), np.broadcast_to(np.arange(3.0), (5000, 3)))
    # two fills that each alone could go: one of them must stay to give the shape
    x = sg.scalar("x")
    g = sg.function([x], sg.where(x > 0, sg.broadcast_to(1.0, (5000,)), sg.broadcast_to(2.0, (5000,))))
    np.testing.assert_array_equal(g(0.5), np.ones(5000))
    np.testing.assert_array_equal(g(-0.5), np.full(5000, 2.0))


def test_reading_the_terms_of_a_long_sum_stops_at_the_limit(monkeypatch):
    """Rules read the addends of the sum at every `+` (up to a few of them): on a chain of
    n additions (a gradient summed over an unrolled loop's steps) each reading must stop
    after about `limit` nodes, or compiling costs n² (a 2000-step HMM took 5.7 s, not 2.7 s)."""
    from stablegrad.rewrite import patterns

    x = sg.vector("x")
    chain = x
    for i in range(2000):
        chain = chain + sg.exp(x * float(i))  # (left-deep: the first addend is 2000 levels down)
    visited = []
    real_owner = patterns.owner
    monkeypatch.setattr(patterns, "owner", lambda v, *ops: visited.append(v) or real_owner(v, *ops))
    assert patterns.terms_with_signs(chain, limit=6) is None
    assert len(visited) <= 8
    visited.clear()
    short = x - sg.exp(x) + sg.exp(-x)
    assert [sign for sign, _ in patterns.terms_with_signs(short, limit=6)] == [1.0, -1.0, 1.0]


def test_a_forward_value_read_only_for_its_shape_is_not_computed():
    """With unknown shapes the gradient of sum(logsumexp(x)) seeds with ones of the result's
    shape; the extent comes from x, so logsumexp's value is not computed at all."""
    x, v = sg.matrix("x"), sg.matrix("v")
    (g,) = sg.grad(sg.sum(sg.logsumexp(x, axis=-1)), [x])
    (hvp,) = sg.grad(sg.sum(g * v), [x])
    f = sg.function([x, v], [g, hvp])
    assert LogSumExp not in _op_types(f)
    x_value, v_value = rng.standard_normal((3, 5)) * 30, rng.standard_normal((3, 5))
    p = np.exp(x_value - x_value.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    got_g, got_hvp = f(x_value, v_value)
    np.testing.assert_allclose(got_g, p, rtol=1e-13)
    np.testing.assert_allclose(
        got_hvp, p * (v_value - (p * v_value).sum(axis=1, keepdims=True)), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize(
    ("build", "extent", "computed"),
    [
        (lambda a, b, c: (a + b).shape[0], 3, False),  # b is 1 there: a alone gives the extent
        (lambda a, b, c: (a + b).shape[1], 4, False),  # a or b could be 1 there: where(|a| == 1, |b|, |a|)
        (lambda a, b, c: sg.sum(sg.exp(a), axis=0).shape[0], 4, False),
        (lambda a, b, c: sg.sum(sg.exp(a), axis=1, keepdims=True).shape[0], 3, False),
        (lambda a, b, c: sg.softmax(sg.exp(a), axis=0).shape[1], 4, False),
        (lambda a, b, c: sg.softmax(a, axis=0, where=c > 0).shape[1], 4, True),  # masked: left alone
    ],
    ids=["broadcast, one source", "broadcast, two sources", "sum", "sum keepdims", "softmax", "masked softmax"],
)
def test_shape_lookups_of_results_go_to_the_operand_that_sets_the_extent(build, extent, computed):
    a, b, c = sg.matrix("a"), sg.tensor("b", shape=(1, None)), sg.vector("c")
    f = sg.function([a, b, c], build(a, b, c))
    assert int(f(rng.standard_normal((3, 4)), rng.standard_normal((1, 4)), rng.standard_normal(4))) == extent
    float_ops = [n.op.name for n in f.nodes if n.outputs[0].dtype.kind == "f"]
    assert bool(float_ops) == computed, float_ops


@pytest.mark.parametrize("w_shape", [(3,), (1,)], ids=["w per row", "w broadcast"])
def test_a_weighted_loss_gradient_does_not_compute_the_loss(w_shape):
    """grad(sum(w * logsumexp(x))) seeds with ones of w * lse's shape: either w or lse could
    set it (one may be 1 at run time), so the lookup becomes where(|w| == 1, |lse|, |w|) and
    neither the product nor logsumexp runs."""
    x, w = sg.matrix("x"), sg.vector("w")
    (g,) = sg.grad(sg.sum(w * sg.logsumexp(x, axis=-1)), [x])
    f = sg.function([x, w], g)
    assert LogSumExp not in _op_types(f)
    x_value, w_value = rng.standard_normal((3, 4)), rng.standard_normal(w_shape)
    p = np.exp(x_value - x_value.max(axis=1, keepdims=True))
    np.testing.assert_allclose(f(x_value, w_value), w_value[:, None] * p / p.sum(axis=1, keepdims=True), rtol=1e-13)
    assert f(np.zeros((0, 4)), np.ones(1)).shape == (0, 4)  # broadcast against 0 rows: 0, as NumPy's


def test_the_shape_of_a_value_computed_anyway_is_read_from_it():
    """a + b is an output: its extent is looked up on it, not rebuilt from a's and b's."""
    a, b = sg.matrix("a"), sg.matrix("b")
    total = a + b
    f = sg.function([a, b], [total, sg.astype(total.shape[1], "float64")])
    assert [n.op.name for n in f.nodes if n.op.name in ("equal", "where")] == []
    np.testing.assert_array_equal(f(np.ones((2, 1)), np.ones((1, 3)))[1], 3.0)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_weights_that_do_not_broadcast_still_fail_with_the_users_line(backend):
    """The product w * logsumexp(x) is not computed for the gradient, but the shapes it
    would have broadcast are still checked where the gradient undoes the broadcast."""
    if backend == "jax":
        pytest.importorskip("jax")
    x, w = sg.matrix("x"), sg.vector("w")
    (g,) = sg.grad(sg.sum(w * sg.logsumexp(x, axis=-1)), [x])
    f = sg.function([x, w], g, backend=backend)
    with pytest.raises(
        sg.ExecutionError, match=r"could not be broadcast together with shapes \(3,\) \(5,\).*test_pipeline"
    ):
        f(np.zeros((3, 4)), np.ones(5))


@pytest.mark.parametrize(
    "build",
    [
        lambda c: sg.log(sg.sum(sg.exp(c))),
        lambda c: sg.log(1 + sg.exp(c)),
        lambda c: sg.exp(c) / sg.sum(sg.exp(c)),
        lambda c: sg.log(sg.exp(c[0]) + sg.exp(c[1])),
    ],
)
def test_complex_formulas_are_left_as_written(build):
    # the stable primitives are real functions; recognising a complex formula would refuse its dtype
    c = sg.tensor("c", (2,), "complex128")
    z = np.array([1 + 1j, 2 - 1j])
    f = sg.function([c], build(c))
    assert "no rewrites changed" in f.explain()
    np.testing.assert_allclose(f(z), sg.function([c], build(c), recognition=False)(z), rtol=1e-15)
