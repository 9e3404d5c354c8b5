"""The compiled NumPy executor: memory, correctness, merging, folding, and the `reads` contract.

The `reads` test hands every pullback the true values of what its op declares it
reads, and poison (NaN, then unrelated finite values) for every other float
operand and output; a pullback that touches an undeclared value changes its
result.  The executor frees forward values on the strength of these declarations,
so a wrong one is a wrong gradient waiting to happen.
"""

from __future__ import annotations

import tracemalloc
from dataclasses import dataclass

import numpy as np
import pytest

import stablegrad as sg
import stablegrad.ops.stable as stable
from stablegrad.backends.numpy_program import HOT_RUNS, UFUNCS, implementation
from stablegrad.graph.basic import READS_OUTPUTS, Apply, Constant, Op, Variable, toposort
from stablegrad.ops.base import Elementwise
from stablegrad.ops.composite import OpFromGraph, SymbolicOp, inline
from stablegrad.ops.gradient_mask import MaskedGradient, masked_gradient
from stablegrad.ops.math import DigammaDifference, Exp, SechSquared, erfcx
from stablegrad.ops.monomial import monomial
from stablegrad.ops.partials import AffineProduct, AffineQuotient, affine_product, affine_quotient, over_argument
from stablegrad.ops.stable.logerfc import log_erfc


# -- memory ------------------------------------------------------------------------------------------
def _chain(x, length: int):
    """`length` cheap elementwise nodes."""
    for i in range(length):
        step = i % 3
        x = x * 1.0001 if step == 0 else x + 0.5 if step == 1 else sg.tanh(x)
    return x


def _chain_numpy(x: np.ndarray, length: int) -> np.ndarray:
    for i in range(length):
        step = i % 3
        x = x * 1.0001 if step == 0 else x + 0.5 if step == 1 else np.tanh(x)
    return x


def test_elementwise_chain_peaks_below_five_times_the_input():
    x = sg.vector("x")
    f = sg.function([x], _chain(x, 30))
    assert len(f.nodes) == 30
    data = np.random.default_rng(0).uniform(-1.0, 1.0, 10**7)
    tracemalloc.start()
    try:
        result = f(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the input is live throughout (the caller holds it); everything else is the executor's
    assert data.nbytes + peak < 5 * data.nbytes, f"peak {peak / data.nbytes:.1f}x the input on top of it"
    assert result.shape == data.shape
    np.testing.assert_allclose(result[:1000], _chain_numpy(data[:1000], 30), rtol=1e-13)
    np.testing.assert_allclose(result[-1000:], _chain_numpy(data[-1000:], 30), rtol=1e-13)


# -- correctness, merging, folding ----------------------------------------------------------------------
def test_outputs_match_numpy_for_several_outputs_and_a_gradient():
    x = sg.tensor("x", (None, 3))
    w = sg.vector("w", length=3)
    y = sg.sum(sg.exp(x) * w, axis=1)
    cost = sg.mean(y**2)
    f = sg.function([x, w], [cost, y, sg.grad(cost, x)])
    xv = np.random.default_rng(1).standard_normal((4, 3))
    wv = np.array([0.5, -1.0, 2.0])
    cost_v, y_v, gx_v = f(xv, wv)
    y_ref = (np.exp(xv) * wv).sum(axis=1)
    np.testing.assert_allclose(y_v, y_ref, rtol=1e-14)
    np.testing.assert_allclose(cost_v, np.mean(y_ref**2), rtol=1e-14)
    np.testing.assert_allclose(gx_v, (2 * y_ref / 4)[:, None] * np.exp(xv) * wv, rtol=1e-13)


def test_an_output_listed_twice_and_an_input_as_output_are_returned():
    x = sg.vector("x")
    y = x * 2.0
    a, b, c = sg.function([x], [y, y, x])(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(a, [2.0, 4.0])
    np.testing.assert_array_equal(b, [2.0, 4.0])
    np.testing.assert_array_equal(c, [1.0, 2.0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("form", ["numpy scalar", "python float", "0-d array"])
def test_a_scalar_function_run_as_operators_on_numpy_scalars_keeps_the_node_by_node_bits(dtype, form):
    """The straight-line version writes the arithmetic ufuncs as Python's operators and takes
    a NumPy scalar argument as it is (NumPy's scalar path); node by node, the ufuncs run on
    0-d arrays.  Both give the same bits, and a 0-d array out, however the number comes in."""
    x = sg.tensor("x", (), dtype)
    f = sg.function([x], (sg.exp(x) * 2.0 - x / 3.0 + 1.0) * -x - sg.maximum(x, 0.25))
    number = {"numpy scalar": np.dtype(dtype).type(0.7), "python float": 0.7, "0-d array": np.asarray(0.7, dtype)}[form]
    expected = f._program.interpret([np.asarray(0.7, dtype)])[0]
    for _ in range(HOT_RUNS + 2):  # (past the runs after which the straight-line version is made)
        got = f(number)
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == ()
        assert got.tobytes() == np.asarray(expected).tobytes()
    assert f._program._straight is not None


def test_a_numpy_scalar_of_another_dtype_or_for_an_array_input_is_checked_as_before():
    x, v = sg.tensor("x", (), "float32"), sg.vector("v")
    f = sg.function([x], x * 2.0)
    assert f(np.float64(0.5)).dtype == np.float32  # read into the input's dtype, as a float is
    with pytest.raises(sg.InputError, match="must have 1 dimensions"):
        sg.function([v], v * 2.0)(np.float64(0.5))


def test_duplicate_subgraphs_are_merged():
    x = sg.vector("x")
    f = sg.function([x], [sg.exp(x) + sg.exp(x)])
    assert sum(isinstance(n.op, Exp) for n in f.nodes) == 1
    np.testing.assert_allclose(f(np.array([0.0, 1.0]))[0], 2 * np.exp([0.0, 1.0]), rtol=1e-15)


def test_merging_is_transitive_through_equal_parameters():
    x = sg.tensor("x", (2, 3))
    f = sg.function([x], sg.sum(sg.tanh(x) * 3.0, axis=1) + sg.sum(sg.tanh(x) * 3.0, axis=1))
    names = [n.op.name for n in f.nodes]
    assert names.count("tanh") == 1
    assert names.count("sum") == 1


def test_constants_are_folded():
    x = sg.vector("x")
    c = sg.exp(sg.constant(1.0)) + sg.constant(2.0) * 3.0
    f = sg.function([x], x * c)
    assert [n.op.name for n in f.nodes] == ["multiply"]
    (folded,) = [v for v in f.nodes[0].inputs if isinstance(v, Constant)]
    assert float(folded.data) == pytest.approx(np.e + 6.0, rel=1e-15)
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), [np.e + 6.0, 2 * (np.e + 6.0)], rtol=1e-15)


def test_a_constant_output_is_returned_as_an_array():
    x = sg.vector("x")
    f = sg.function([x], [x + 1.0, sg.constant([1.0, 2.0]) * 2.0])
    assert f.nodes and all(not isinstance(o, Constant) for n in f.nodes for o in n.outputs)
    np.testing.assert_array_equal(f(np.zeros(2))[1], [2.0, 4.0])


# -- the reads contract --------------------------------------------------------------------------------------
def _leaf(rng, name, shape, low=0.2, high=0.9):
    return sg.tensor(name, shape), rng.uniform(low, high, shape)


def _representative_graphs():
    """(leaves, values, outputs): one small graph per op family, built with the public functions."""
    rng = np.random.default_rng(0)
    (a, av), (b, bv), (m, mv), (v, vv) = (
        _leaf(rng, "a", (3, 4)),
        _leaf(rng, "b", (4,)),
        _leaf(rng, "m", (4, 2)),
        _leaf(rng, "v", (4,), 1.2, 1.9),
    )
    i, iv = sg.tensor("i", (None,), "int64"), np.array([2, 0, 2])
    labels, labels_v = sg.tensor("labels", (3,), "int64"), np.array([1, 3, 0])
    z, zv = sg.tensor("z", (None, 1)), np.ones((5, 1))
    c, cv = sg.tensor("c", (3, 4), "complex128"), av + 1j * rng.uniform(-3.0, 3.0, (3, 4))
    leaves, values = [a, b, m, v, i, labels, z, c], [av, bv, mv, vv, iv, labels_v, zv, cv]
    p, q = sg.vector("p"), sg.vector("q")
    hypot = OpFromGraph([p, q], sg.sqrt(p * p + q * q))
    spd = a @ sg.transpose(a) + 3.0 * sg.eye(3)
    outputs = [
        # arithmetic and selection
        a + b, a - b, a * b, a / b, a**b, a // b, a % b, -a, abs(a), sg.square(a),
        sg.sqrt(a), sg.reciprocal(a), sg.maximum(a, b), sg.minimum(a, b),
        sg.sign(a), sg.floor(a), sg.ceil(a), sg.round(a, 1), sg.where(a > 0.5, a, b),
        sg.clip(a, 0.3, 0.7), sg.astype(a, "float32"), sg.logical_and(a > 0.5, b < 0.5),
        sg.isnan(a),
        # math and special functions
        sg.exp(a), sg.exp2(a), sg.expm1(a), sg.log(a), sg.log2(a), sg.log10(a), sg.log1p(a),
        sg.sin(a), sg.cos(a), sg.tan(a), sg.tanh(a), sg.sinh(a), sg.cosh(a), sg.arctan(a),
        sg.arcsinh(a), sg.arccosh(1.0 + a), sg.arctanh(0.5 * a),
        sg.erf(a), sg.erfc(a), erfcx(a), SechSquared()(a), sg.gammaln(a), sg.digamma(a), sg.polygamma(2, a),
        # reductions
        sg.sum(a, axis=1), sg.prod(a, axis=0, keepdims=True), sg.max(a, axis=1), sg.min(a),
        sg.any(a > 0.5, axis=0), sg.all(a > 0.5), sg.argmax(a, axis=1), sg.mean(a), sg.std(a, axis=0),
        # shapes
        sg.reshape(a, (4, 3)), sg.reshape(a[i], (-1,)), sg.transpose(a), sg.expand_dims(a, 1),
        sg.squeeze(sg.expand_dims(a, 0), 0), sg.broadcast_to(b, (2, 3, 4)), sg.concatenate([a, a * 2.0]),
        sg.stack([b, b]), a * z.shape[0],
        # indexing
        a[1], a[:, 1:3], a[i], a[i, 1:], a[a > 0.5], a.at[1].set(b), a.at[i].add(b), a.at[:, 0].set(0.0),
        # products
        a @ m, b @ m, sg.einsum("ij,jk->ik", a, m), sg.tensordot(a, m, axes=1), sg.outer(b, b),
        # dense linear algebra, on a positive-definite matrix built from a
        sg.linalg.cholesky(spd), sg.linalg.solve(spd, a), sg.linalg.solve_triangular(sg.linalg.cholesky(spd), a),
        sg.linalg.inv(spd), sg.linalg.det(spd), sg.linalg.slogdet(spd)[1], sg.linalg.norm(a, axis=1),
        sg.ndtr(a), sg.ndtri(a), sg.betaln(a, b), DigammaDifference()(a, b), sg.kv(1.5, a), sg.kve(0.5, a), sg.iv(2.0, a), sg.ive(1.0, a),
        # running sums and sorting
        sg.cumsum(a, axis=1), sg.cumprod(a, axis=0), sg.sort(a, axis=1), sg.argsort(a, axis=0),
        # creation
        sg.full((2, 3), a[0, 0]), sg.zeros_like(a[i]) + 1.0, sg.arange(a.shape[0] + i.shape[0]),
        # composites, and the ops only gradients use (ReduceTo, SplitLike)
        hypot(b, v), sg.grad(sg.sum(sg.concatenate([a * b, a]) ** 2), b),
        # the stable family
        stable.logsumexp(a, axis=1), stable.logsumexp(a, axis=1, b=a), stable.logmeanexp(a, axis=0),
        sg.grad(sg.sum(stable.logsumexp(a, axis=1) * b[:3]), a), stable.logcumsumexp(a, axis=1), stable.softmax(a), stable.log_softmax(a, axis=0),
        stable.softmax(a, where=a > 0.3), stable.softmax_cross_entropy(a, labels),
        stable.softmax_cross_entropy(a, stable.softmax(a * 2.0)), stable.logaddexp(a, b), stable.exp_of_sum(a, -b),
        stable.log1mexp(-a), stable.logdiffexp(a + 1.0, a), stable.sigmoid(a), stable.log_sigmoid(a),
        stable.softplus(a), stable.logit(a), stable.xlogy(a, b), stable.xlog1py(a, b),
        log_erfc(a), stable.xexpx(a - 1.0), masked_gradient(a, a > 0.3),
        stable.log_ndtr(a), stable.log_cosh(a), stable.log_sigmoid_difference(a + 1.0, a), stable.sech(a),
        # quotients differentiated without the quotient rule's cancellation
        affine_quotient(a - b, a + b, [a, b], [1, -1, 0], [1, 1, 0]), over_argument(a, "sin"), over_argument(a, "sinh"),
        over_argument(a, "tanh"), over_argument(a, "expm1"), over_argument(a, "log1p"),
        affine_product(a - b, a + b, [a, b], [1, -1, 0], [1, 1, 0]),
        # products kept in range
        monomial([a, b, v], [2, -1, 1]),
        # complex numbers
        sg.real(c), sg.imag(c), sg.conj(c), sg.angle(c), abs(c), stable.logsumexp(c, axis=1),
        *stable.logsumexp(c, axis=0, b=c * 1j, return_sign=True), stable.logsumexp(a, axis=1, b=c, where=a > 0.1),
    ]  # fmt: skip
    return leaves, values, outputs


def _harvest():
    """Every distinct (op, operand types) node of the representative graphs, composite bodies included."""
    leaves, values, outputs = _representative_graphs()
    found: dict[tuple, Apply] = {}
    pending = list(toposort(outputs))
    while pending:
        node = pending.pop()
        key = (node.op, tuple(v.type for v in node.inputs))
        if key in found:
            continue
        found[key] = node
        if isinstance(node.op, SymbolicOp | OpFromGraph):
            pending.extend(toposort(inline(node.op, node.inputs), stop=node.inputs))
    return leaves, values, list(found.values())


LEAVES, VALUES, NODES = _harvest()


def _has_pullback(cls: type) -> bool:
    return cls.pullback is not Op.pullback


def _concrete_ops() -> set[type]:
    result, pending = set(), [Op]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "__final__", False) or cls is OpFromGraph:
            result.add(cls)
    return {c for c in result if c.__module__.startswith("stablegrad.") and _has_pullback(c)}


def test_every_op_with_a_pullback_has_a_representative_node():
    covered = {type(n.op) for n in NODES}
    missing = sorted(c.__qualname__ for c in _concrete_ops() - covered)
    assert not missing, f"add a use of these ops to _representative_graphs: {missing}"


def _forward_values() -> dict[int, list[np.ndarray]]:
    """Operand values of every harvested node, by running the representative graphs."""
    result: dict[int, list[np.ndarray]] = {}
    known: dict[int, np.ndarray] = {v.id: val for v, val in zip(LEAVES, VALUES)}

    def value(v: Variable) -> np.ndarray:
        if isinstance(v, Constant):
            return v.data
        if v.id not in known:
            node = v.owner
            assert node is not None, f"no value for {v!r}"
            outs = node.op.perform(*(value(x) for x in node.inputs))
            for o, r in zip(node.outputs, (outs,) if node.op.nout == 1 else outs):
                known[o.id] = np.asarray(r)
        return known[v.id]

    for node in NODES:  # the graphs are shallow, so recursing is fine
        result[id(node)] = [value(v) for v in node.inputs]
    return result


_FORWARD = _forward_values()


def _pullback_results(node: Apply, inputs, outputs, cotangents, poison_inputs=(), poison_outputs=()):
    """The node's pullback, run on placeholders fed the given values."""
    in_vars = [
        x if isinstance(x, Constant) else sg.tensor(f"in{k}", x.type.shape, x.dtype) for k, x in enumerate(node.inputs)
    ]
    out_vars = [sg.tensor(f"out{k}", o.type.shape, o.dtype) for k, o in enumerate(node.outputs)]
    cot_vars = [sg.tensor(f"g{k}", o.type.shape, o.dtype) for k, o in enumerate(node.outputs)]
    grads = node.op.pullback(in_vars, out_vars, cot_vars)
    wanted = [g for g, x in zip(grads, node.inputs) if isinstance(g, Variable) and x.type.is_float()]
    if not wanted:
        return []
    free = [v for v in in_vars if not isinstance(v, Constant)]
    f = sg.function([*free, *out_vars, *cot_vars], wanted, recognition=False)
    feed_inputs = [val for val, x in zip(inputs, node.inputs) if not isinstance(x, Constant)]
    return f(*feed_inputs, *outputs, *cotangents)


def _poisoned(values, variables, declared, poison):
    return [
        val if declared(k) or not var.type.is_float() or isinstance(var, Constant) else poison(val)
        for k, (val, var) in enumerate(zip(values, variables))
    ]


def check_reads(node: Apply) -> None:
    """Assert that `node`'s pullback reads only what its op declares."""
    rng = np.random.default_rng(1)
    inputs = _FORWARD[id(node)]
    with np.errstate(all="ignore"):
        outs = node.op.perform(*inputs)
    outputs = [np.asarray(o) for o in ((outs,) if node.op.nout == 1 else outs)]
    cotangents = [
        rng.standard_normal(o.shape).astype(o.dtype) + (1j * rng.standard_normal(o.shape) if o.dtype.kind == "c" else 0)
        if o.dtype.kind in "fc"
        else np.zeros_like(o)
        for o in outputs
    ]
    reads = node.op.reads
    with np.errstate(all="ignore"):
        truth = _pullback_results(node, inputs, outputs, cotangents)
        poisons = (
            lambda val: np.full_like(val, np.nan),
            lambda val: rng.uniform(0.25, 0.85, np.shape(val)).astype(val.dtype),
        )
        for poison in poisons:
            result = _pullback_results(
                node,
                _poisoned(inputs, node.inputs, reads.reads_input, poison),
                _poisoned(outputs, node.outputs, reads.reads_output, poison),
                cotangents,
            )
            for k, (want, got) in enumerate(zip(truth, result)):
                np.testing.assert_array_equal(
                    got, want, err_msg=f"{node.op.name}: gradient {k} reads more than {reads}"
                )


@pytest.mark.parametrize("node", NODES, ids=[f"{n.op.name}-{k}" for k, n in enumerate(NODES)])
def test_pullback_reads_only_what_the_op_declares(node):
    check_reads(node)


@dataclass(frozen=True)
class _ExpDeclaringItsOutput(Elementwise):
    """A deliberately wrong declaration: says it reads its output, reads its operand."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.exp(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * sg.exp(inputs[0])]


def test_the_reads_check_catches_a_wrong_declaration():
    x = sg.vector("x")
    node = _ExpDeclaringItsOutput()(x).owner
    _FORWARD[id(node)] = [np.array([0.1, 0.2])]
    try:
        with pytest.raises(AssertionError, match="reads more than"):
            check_reads(node)
    finally:
        del _FORWARD[id(node)]


@pytest.mark.parametrize("cls", list(UFUNCS))
def test_ops_the_backend_runs_as_bare_ufuncs_perform_exactly_that_ufunc(cls):
    op = cls()
    args = [np.array([-2.5, -0.0, 0.0, 0.5, np.inf, -np.inf, np.nan, 700.0])] * (op.perform.__code__.co_argcount - 1)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(op.perform(*args), UFUNCS[cls](*args))
    assert implementation(op) is UFUNCS[cls]


# -- pushforwards: each op's forward-mode rule, against its transposed pullback and finite differences ---
def _pushforward_values(node: Apply, rule, h: float = 0.0, seed: int = 2):
    """rule(op, inputs, outputs, tangents) on placeholders fed the node's operand values and random
    tangents; with h, also the central difference (f(x + h·t) - f(x - h·t)) / 2h of the op itself."""
    rng = np.random.default_rng(seed)
    values = _FORWARD[id(node)]
    in_vars = [
        x if isinstance(x, Constant) else sg.tensor(f"in{k}", x.type.shape, x.dtype) for k, x in enumerate(node.inputs)
    ]
    free = [(v, val) for v, val in zip(in_vars, values) if not isinstance(v, Constant)]
    moving = [v for v, _ in free if v.type.is_float()]
    t_vars = {v.id: sg.tensor(f"t{k}", v.type.shape, v.dtype) for k, v in enumerate(moving)}
    t_vals = {v.id: rng.standard_normal(np.shape(val)).astype(val.dtype) for v, val in free if v.id in t_vars}
    outs = node.op(*in_vars)
    outs = [outs] if isinstance(outs, Variable) else list(outs)
    pushed = rule(node.op, in_vars, outs, [t_vars.get(v.id) for v in in_vars])
    floats = [k for k, o in enumerate(outs) if o.type.is_float()]
    wanted = [pushed[k] if pushed[k] is not None else sg.zeros_like(outs[k]) for k in floats]
    feed = [*(v for v, _ in free), *t_vars.values()]
    with np.errstate(all="ignore"):
        got = sg.function(feed, wanted, recognition=False)(*(val for _, val in free), *t_vals.values())
        if not h:
            return got, None
        f = sg.function([v for v, _ in free], [outs[k] for k in floats], recognition=False)

        def at(sign):
            return f(*(val + sign * h * t_vals[v.id] if v.id in t_vals else val for v, val in free))

        difference = [(a - b) / (2 * h) for a, b in zip(at(1), at(-1))]
    return got, difference


@pytest.mark.parametrize("node", NODES, ids=[f"{n.op.name}-{k}" for k, n in enumerate(NODES)])
def test_pushforward_is_the_transposed_pullback_and_the_derivative(node):
    from stablegrad.autodiff import transposed_pullback

    def own(op, *args):
        return op.pushforward(*args)

    got, difference = _pushforward_values(node, own, h=1e-6)
    reference, _ = _pushforward_values(node, transposed_pullback)
    for k, (g, r, d) in enumerate(zip(got, reference, difference)):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12, err_msg=f"{node.op.name}: tangent {k}")
        # (float32 differences say nothing at h = 1e-6; masked_gradient's gradient is 0 where its value's slope
        # is 1; the affine ops' operands a and c are forms of their terms, and the terms carry the whole slope)
        if g.dtype == np.float64 and not isinstance(node.op, MaskedGradient | AffineQuotient | AffineProduct):
            np.testing.assert_allclose(
                g, d, rtol=1e-4, atol=1e-6, err_msg=f"{node.op.name}: tangent {k} vs differences"
            )
