"""The JAX backend: parity with NumPy on a table of graphs that uses every op, and its own contracts.

Each case builds outputs from symbolic inputs; both backends compile the outputs and
the gradient of `sum(w * output)` with respect to every float input, and must agree
in dtype, shape and value (float64 to 1e-12 unless a case says otherwise).
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import ml_dtypes  # noqa: E402  (JAX depends on it)

import stablegrad as sg  # noqa: E402
from stablegrad.backends import jax_backend  # noqa: E402
from stablegrad.graph.basic import Op  # noqa: E402
from stablegrad.ops.composite import OpFromGraph, SymbolicOp  # noqa: E402
from stablegrad.ops.math import DigammaDifference, erfcx  # noqa: E402
from stablegrad.ops.scan import Scan  # noqa: E402
from stablegrad.ops.stable import logcumsumexp, logsumexp, softmax, softmax_cross_entropy  # noqa: E402

RNG = np.random.default_rng(0)


def normal(*shape, dtype="float64", scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def positive(*shape, dtype="float64"):
    return RNG.uniform(0.5, 2.5, shape).astype(dtype)


def ints(*shape, lo=-3, hi=4, dtype="int64"):
    return RNG.integers(lo, hi, shape).astype(dtype)


def _jax_sort(x):
    from stablegrad.jax.opaque import JaxCall

    return JaxCall(jax.lax.sort_p, {"dimension": 0, "is_stable": True, "num_keys": 1}, (x.type,))(x)


@dataclass(frozen=True)
class Case:
    """Outputs `build(*inputs)` on inputs typed like `arrays` (`symbolic`: every extent unknown)."""

    name: str
    build: Callable
    arrays: tuple
    symbolic: bool = False
    rtol: float = 1e-12
    grad: bool = True

    def __str__(self) -> str:
        return self.name


def _outer_stack(a, b):
    return sg.stack([a, b], axis=1)


def _hmm(log_a, log_b, log_pi):
    """Forward algorithm in log space, written naively (recognition repairs it)."""

    def step(alpha, lb):
        return sg.log(sg.sum(sg.exp(alpha[:, None] + log_a), axis=0)) + lb, alpha

    final, _ = sg.scan(step, log_pi + log_b[0], log_b[1:])
    return sg.log(sg.sum(sg.exp(final)))


def _geometric(x):
    """A scan without sequences: carry *= x, five times, keeping every step."""
    final, ys = sg.scan(lambda c, _: (c * x, sg.sum(c)), sg.ones_like(x), length=5)
    return [final, ys]


_M = normal(3, 3)
_SPD = _M @ _M.T + 3.0 * np.eye(3)  # positive definite, well conditioned

CASES = [
    # -- elementwise arithmetic ----------------------------------------------------------------------
    Case("add_sub_mul_div", lambda x, y: [x + y, x - y, x * y, x / y], (normal(3, 4), positive(4))),
    Case("power", lambda x, y: [x**y, x**2, x**1], (positive(3, 4), normal(3, 4))),
    Case("floor_divide_mod", lambda x, y: [x // y, x % y], (normal(5, scale=4), positive(5)), grad=True),
    Case("int_floor_divide_mod", lambda x, y: [x // y, x % y], (ints(6), ints(6, lo=1, hi=4))),
    Case("maximum_minimum", lambda x, y: [sg.maximum(x, y), sg.minimum(x, y)], (normal(4, 3), normal(3))),
    Case("maximum_ties", lambda x, y: [sg.maximum(x, y), sg.minimum(x, y)], (np.ones(3), np.ones(3))),
    Case("unary", lambda x: [-x, sg.abs(x), sg.square(x), sg.sign(x)], (normal(2, 3),)),
    Case(
        "sqrt_reciprocal",
        lambda x: [sg.sqrt(x), sg.reciprocal(x), sg.reciprocal(sg.astype(x, "int64"))],
        (positive(4) * 3,),
    ),
    Case("rounding", lambda x: [sg.floor(x), sg.ceil(x), sg.round(x), sg.round(x, 1)], (normal(7, scale=3),)),
    Case("clip", lambda x, lo, hi: [sg.clip(x, lo, hi)], (normal(6, scale=2), np.array(-0.5), np.array(0.7))),
    Case(
        "compare",
        lambda x, y: [x < y, x <= y, x > y, x >= y, sg.equal(x, y), sg.not_equal(x, y)],
        (ints(8, dtype="int32"), np.round(normal(8, dtype="float32"))),
        grad=False,
    ),
    Case(
        "logical",
        lambda x, y: [
            sg.logical_and(x > 0, y > 0),
            sg.logical_or(x > 0, y > 0),
            sg.logical_xor(x > 0, y > 0),
            sg.logical_not(x > 0),
            sg.isnan(x),
            sg.isinf(x),
            sg.isfinite(x),
        ],
        (np.array([np.nan, np.inf, -np.inf, 0.0, 1.5, -2.0]), normal(6)),
        grad=False,
    ),
    Case(
        "where",
        lambda c, x, y: [sg.where(c, x, y), sg.where(x > y, x, 0.0)],
        (RNG.random(5) < 0.5, normal(5), normal(5)),
    ),
    Case(
        "casts",
        lambda x: [sg.astype(x, "float32"), sg.astype(x, "int32"), sg.astype(x * 10, "int64") + 1],
        (normal(5),),
    ),
    Case(
        "numpy_promotion",  # int32 + float32 is float64 in NumPy, float32 in JAX; sqrt(int8) is float16 in NumPy
        lambda i, f, b: [i + f, i * f, sg.sqrt(b), sg.sum(i), sg.prod(b)],
        (ints(4, dtype="int32"), normal(4, dtype="float32"), ints(4, lo=0, hi=5, dtype="int8")),
        rtol=1e-6,
    ),
    Case(
        "float32_chain",
        lambda x, w: [sg.tanh(x @ w) * 2.0 + 1.0],
        (normal(8, 5, dtype="float32"), normal(5, 3, dtype="float32")),
        rtol=2e-6,
    ),
    # -- math -----------------------------------------------------------------------------------------
    Case(
        "exp_log",
        lambda x: [sg.exp(x), sg.exp2(x), sg.expm1(x), sg.log(x), sg.log2(x), sg.log10(x), sg.log1p(x)],
        (positive(3, 3),),
    ),
    Case(
        "trig",
        lambda x: [sg.sin(x), sg.cos(x), sg.tan(x), sg.tanh(x), sg.sinh(x), sg.cosh(x), sg.arctan(x), sg.arcsinh(x)],
        (normal(3, 3),),
    ),
    Case("inverse_hyperbolic", lambda x: [sg.arccosh(1.0 + x), sg.arctanh(x / (1.0 + x))], (positive(3, 3),)),
    Case("special", lambda x: [sg.erf(x), sg.erfc(x), erfcx(x)], (normal(6, scale=3),), rtol=1e-11),
    Case("gamma", lambda x: [sg.gammaln(x), sg.digamma(x), sg.polygamma(1, x)], (positive(6) * 2,), rtol=1e-10),
    # -- reductions -----------------------------------------------------------------------------------
    Case(
        "sum_prod",
        lambda x: [sg.sum(x), sg.sum(x, axis=1), sg.prod(x, axis=0, keepdims=True), sg.prod(x)],
        (normal(3, 4),),
        symbolic=True,
    ),
    Case(
        "prod_with_zeros",
        lambda x: [sg.prod(x, axis=1)],
        (np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.0], [1.0, 2.0, 4.0]]),),
    ),
    Case(
        "max_min", lambda x: [sg.max(x, axis=0), sg.min(x, axis=(0, 1)), sg.max(x, keepdims=True)], (normal(3, 4, 2),)
    ),
    Case("reduce_no_axes_of_empty", lambda x: [sg.max(x, axis=()), sg.sum(x, axis=())], (np.zeros((0, 2)),)),
    Case("max_ties", lambda x: [sg.max(x, axis=1)], (np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]),)),
    Case(
        "any_all_arg",
        lambda x: [
            sg.any(x > 1, axis=0),
            sg.all(x > -1),
            sg.argmax(x, axis=1),
            sg.argmin(x),
            sg.argmax(x, keepdims=True),
            sg.argmin(x, axis=0, keepdims=True),
            sg.count_nonzero(x > 0, axis=1),
        ],
        (normal(4, 5),),
        grad=False,
    ),
    Case(
        "mean_var_std",
        lambda x: [sg.mean(x), sg.mean(x, axis=0), sg.var(x, axis=1), sg.std(x, ddof=1)],
        (normal(5, 3),),
        symbolic=True,
    ),
    Case(
        "running_and_sorting",
        lambda x: [sg.cumsum(x, axis=1), sg.cumprod(x, axis=0), sg.sort(x, axis=1), sg.argsort(x, axis=0)],
        (normal(3, 4),),
    ),
    # -- dense linear algebra and the normal CDF ------------------------------------------------------
    Case(
        "linalg",
        lambda a, b: [
            sg.linalg.cholesky(a),
            sg.linalg.solve(a, b),
            sg.linalg.solve_triangular(sg.linalg.cholesky(a), b),
            sg.linalg.inv(a),
            sg.linalg.det(a),
            sg.linalg.slogdet(a)[1],
            sg.linalg.norm(b * 1e200, axis=0),
            sg.linalg.norm(a, 1),
        ],
        (_SPD, normal(3, 2)),
        rtol=1e-10,
    ),
    Case(
        "normal_cdf_betaln",
        lambda x, p: [sg.ndtr(x), sg.ndtri(p), sg.betaln(p, x * x + 1.0), DigammaDifference()(x * x + 1e6, p)],
        (normal(6, scale=3), RNG.uniform(0.05, 0.95, 6)),
        rtol=1e-11,
    ),
    Case(
        "modified_bessel",
        lambda x: [sg.kv(1.5, x), sg.kve(0.5, x), sg.iv(2.0, x), sg.ive(1.0, x), sg.log(sg.kv(1.0, 300.0 * x))],
        (RNG.uniform(0.2, 5.0, 6),),
        rtol=1e-12,
    ),
    Case(
        "kept_jax_primitive",  # stabilize's stand-in for a JAX primitive without an op (jax/opaque.py)
        lambda x: [_jax_sort(x) * sg.arange(6.0)],
        (normal(6),),
    ),
    # -- shapes ---------------------------------------------------------------------------------------
    Case(
        "reshape_symbolic",
        lambda x: [sg.reshape(x, (x.shape[0] * x.shape[1],)), sg.reshape(x, (-1, 2)), sg.ravel(x.T)],
        (normal(3, 4),),
        symbolic=True,
    ),
    Case(
        "transpose_axes",
        lambda x: [sg.transpose(x, (2, 0, 1)), sg.moveaxis(x, 0, -1), sg.swapaxes(x, 0, 1), sg.expand_dims(x, (0, 2))],
        (normal(2, 3, 4),),
    ),
    Case("squeeze", lambda x: [sg.squeeze(x), sg.squeeze(x, 0)], (normal(1, 3, 1),)),
    Case(
        "broadcast",
        lambda x, y: [sg.broadcast_to(x, (4, y.shape[0], 3)), *sg.broadcast_arrays(x, y[:, None])],
        (normal(1, 3), normal(2)),
        symbolic=True,
    ),
    Case(
        "concatenate_stack",
        lambda x, y: [sg.concatenate([x, y, x], axis=1), _outer_stack(x[:, 0], y[:, 1]), sg.atleast_1d(x[0, 0])],
        (normal(3, 2), normal(3, 4)),
        symbolic=True,
    ),
    # -- indexing -------------------------------------------------------------------------------------
    Case("slices", lambda x: [x[1:, ::2], x[-1], x[None, ..., 0], x[::-1, 1:3]], (normal(4, 5),), symbolic=True),
    Case(
        "advanced",
        lambda x, i: [x[i], x[:, i], x[i, i], x[np.array([0, 0, 2])], x[np.array([True, False, True, False])]],
        (normal(4, 4), np.array([3, 0, 1, 0, 3])),
    ),
    Case(
        "take_along_axis",
        lambda x, i: [sg.take_along_axis(x, i, axis=1)],
        (normal(3, 4), ints(3, 2, lo=0, hi=4)),
        symbolic=True,
    ),
    Case(
        "at_set_add",
        lambda x, v, i: [
            x.at[i].add(v),
            x.at[1:3].set(v[0]),
            x.at[np.array([True, False, True, False, True])].set(0.0),
        ],
        (normal(5, 2), normal(3, 2), np.array([0, 4, 0])),
    ),
    # -- products -------------------------------------------------------------------------------------
    Case("matmul", lambda a, b, v: [a @ b, a @ v, v @ b, sg.dot(v, v)], (normal(3, 4), normal(4, 5), normal(4))),
    Case("matmul_batched", lambda a, b: [a @ b, sg.matmul(a, b[0])], (normal(2, 3, 4), normal(2, 4, 5))),
    Case(
        "einsum",
        lambda a, b: [sg.einsum("ij,jk->ik", a, b), sg.einsum("ij,ij->i", a, a), sg.tensordot(a, b, 1), sg.outer(a, b)],
        (normal(3, 4), normal(4, 2)),
    ),
    Case("dot_nd", lambda a, b: [sg.dot(a, b)], (normal(2, 3, 4), normal(4, 5))),
    # -- creation -------------------------------------------------------------------------------------
    Case(
        "creation_symbolic",
        lambda x: [
            sg.zeros_like(x) + x,
            sg.full_like(x, 2.5) * x,
            sg.ones((x.shape[0], 2)),
            sg.arange(x.shape[1]) * x,
            sg.arange(0.5, x.shape[0], 0.5),
            sg.eye(3),
        ],
        (normal(3, 4),),
        symbolic=True,
    ),
    # -- the stable family (SymbolicOps inline to plain ops; a few are primitives) ------------------------
    Case(
        "stable_family",
        lambda x, y: [
            logsumexp(x, axis=1),
            softmax(x, axis=0),
            softmax(x, axis=1, where=x > -100),  # masked: through its body (MaxShift), not whole
            sg.mean(softmax_cross_entropy(x, y)),
            logcumsumexp(x, axis=1),
        ],
        (normal(4, 5, scale=300), np.array([0, 4, 2, 2])),
        symbolic=True,
    ),
    Case("logsumexp_empty_axis", lambda x: [logsumexp(x, axis=1)], (np.zeros((2, 0)),)),
    # -- complex numbers and bfloat16 (gradients of the real parts: the cost casts outputs to float64) ------
    Case(
        "complex_parts_and_logsumexp",
        lambda z, w: [
            sg.real(z),
            sg.imag(z),
            sg.conj(z),
            sg.angle(z),
            sg.abs(z),
            logsumexp(z, axis=1),
            *logsumexp(z, axis=0, b=w, return_sign=True),
        ],
        (normal(3, 4, scale=400) + 1j * normal(3, 4), normal(3, 4) + 1j * normal(3, 4)),
    ),
    Case(
        "bfloat16",
        lambda x: [sg.exp(x), sg.erf(x), x * 2.0, logsumexp(x, axis=1), sg.softmax(x), sg.sum(x, axis=1), sg.mean(x)],
        (normal(3, 300).astype(ml_dtypes.bfloat16),),
        rtol=2**-8,  # XLA's bfloat16 exp and ml_dtypes' may round one ulp apart
    ),
    # -- loops ----------------------------------------------------------------------------------------
    Case(
        "scan_cumsum", lambda xs: list(sg.scan(lambda c, x: (c + x, c * x), sg.zeros_like(xs[0]), xs)), (normal(6, 3),)
    ),
    Case(
        "scan_reverse_tuple",
        lambda xs, w: list(
            sg.scan(
                lambda c, x: ((c[0] * w + x, c[1] + 1.0), sg.tanh(c[0])),
                (sg.zeros_like(w), sg.constant(0.0)),
                xs,
                reverse=True,
            )[0]
        ),
        (normal(5, 2), normal(2)),
    ),
    Case("scan_length", _geometric, (positive(3),)),
    Case(
        "hmm_forward",
        lambda a, b, p: [_hmm(a, b, p)],
        (normal(4, 4), normal(20, 4, scale=30), normal(4)),
        symbolic=True,
    ),
]


def _compile(case: Case, backend: str):
    xs = [
        sg.tensor(f"a{i}", shape=(None,) * np.ndim(a) if case.symbolic else np.shape(a), dtype=np.asarray(a).dtype)
        for i, a in enumerate(case.arrays)
    ]
    outs = case.build(*xs)
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    floats = [x for x in xs if x.type.is_float()]
    if case.grad and floats:
        cost = sum(
            (sg.sum(sg.astype(o, "float64") * float(k + 1.5)) for k, o in enumerate(outs) if o.type.is_float()),
            start=sg.constant(0.0),
        )
        outs = outs + sg.grad(cost, floats, disconnected="zero")
    return sg.function(xs, outs, backend=backend), outs


@pytest.mark.parametrize("case", CASES, ids=str)
def test_jax_matches_numpy(case: Case):
    numpy_fn, _ = _compile(case, "numpy")
    jax_fn, _ = _compile(case, "jax")
    expected, got = numpy_fn(*case.arrays), jax_fn(*case.arrays)
    for i, (e, g) in enumerate(zip(expected, got)):
        assert isinstance(g, np.ndarray), f"output {i} is a {type(g).__name__}"
        assert g.dtype == e.dtype, f"output {i}: jax gives {g.dtype}, numpy {e.dtype}"
        assert g.shape == e.shape, f"output {i}: jax gives shape {g.shape}, numpy {e.shape}"
        if e.dtype.kind in "fc" or e.dtype == ml_dtypes.bfloat16:
            # float32: a few units in the last place of O(1) values (2.4e-7 each), cancellations included
            rtol, atol = (max(case.rtol, 2e-6), 1e-6) if e.dtype == np.float32 else (case.rtol, case.rtol * 1e-2)
            if e.dtype == ml_dtypes.bfloat16:  # (NumPy's allclose has no bfloat16 loops)
                g, e = g.astype(np.float32), e.astype(np.float32)
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")


# -- every op has a lowering, and the table above runs every one of them --------------------------------------
def _all_op_classes() -> list[type]:
    for module in pkgutil.walk_packages(sg.__path__, "stablegrad."):
        if not module.name.endswith("__main__"):
            try:
                importlib.import_module(module.name)
            except ModuleNotFoundError as missing:  # another optional backend's dependency (numba)
                if not module.name.startswith("stablegrad.backends."):
                    raise
                assert missing.name != "stablegrad", missing
    found: list[type] = []
    stack = [Op]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        concrete = getattr(cls, "__final__", False) or not cls.__subclasses__()
        # (a backend's private ops, as the Numba backend's fused nodes, exist only inside its own programs)
        private = cls.__module__.startswith("stablegrad.backends.")
        if cls.__module__.startswith("stablegrad.") and concrete and not private and not inspect.isabstract(cls):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__qualname__)


def test_every_op_has_a_lowering():
    missing = [c.__qualname__ for c in _all_op_classes() if jax_backend.lowering_of(c) is None]
    assert not missing, f"ops without a JAX lowering: {missing}"


def test_parity_table_runs_every_primitive_op():
    ran: set[type] = set()
    for case in CASES:
        fn, _ = _compile(case, "jax")
        plans = [fn._program.plan]
        while plans:
            plan = plans.pop()
            for node in plan.nodes:
                ran.add(type(node.op))
                if isinstance(node.op, Scan):
                    plans.append(jax_backend.trace.inner_plan(node.op))
    composite = (SymbolicOp, OpFromGraph)  # inlined before backends see them; tested below
    untested = [c.__qualname__ for c in _all_op_classes() if not issubclass(c, composite) and c not in ran]
    assert not untested, f"ops the parity table never runs on jax: {untested}"


class _Hypot(SymbolicOp):
    """A SymbolicOp kept whole (not inlined), so the backend lowers it through its body."""

    inline: ClassVar[bool] = False

    def build(self, a, b):
        return sg.sqrt(a * a + b * b)


def test_symbolic_op_kept_whole_lowers_through_its_body():
    a, b = sg.vector("a"), sg.vector("b")
    out = _Hypot()(a, b) * 2.0
    f = sg.function([a, b], [out, sg.grad(sg.sum(out), a)], backend="jax")
    assert any(isinstance(n.op, _Hypot) for n in f.nodes)
    value, grad = f(np.array([3.0, 5.0]), np.array([4.0, 12.0]))
    np.testing.assert_allclose(value, [10.0, 26.0], rtol=1e-15)
    np.testing.assert_allclose(grad, [2 * 3 / 5, 2 * 5 / 13], rtol=1e-15)


def test_op_from_graph_lowers_through_its_body():
    a = sg.vector("a")
    square_plus_one = OpFromGraph([a], [a * a + 1.0])
    x = sg.vector("x")
    values = np.array([1.0, -2.0])
    out = jax_backend.trace.lower_composite(square_plus_one, values)
    np.testing.assert_array_equal(np.asarray(out), [2.0, 5.0])
    f = sg.function([x], square_plus_one(x), backend="jax")
    np.testing.assert_array_equal(f(values), [2.0, 5.0])


# -- float64 without touching JAX's global configuration ----------------------------------------------------
def test_float64_without_global_config():
    before = jax.config.jax_enable_x64
    x = sg.vector("x")
    f = sg.function([x], [sg.exp(x) - 1.0, sg.argmax(x)], backend="jax")
    value, index = f(np.array([1e-10, 2.0]))
    assert value.dtype == np.float64 and index.dtype == np.int64
    assert value[0] == pytest.approx(1e-10, rel=1e-6)  # float32 would round 1 + 1e-10 to 1
    assert jax.config.jax_enable_x64 == before
    assert jax.numpy.ones(2).dtype == (np.float64 if before else np.float32)


def test_float32_stays_float32():
    x = sg.vector("x", dtype="float32")
    f = sg.function([x], [sg.mean(x * 2.0), sg.grad(sg.sum(sg.tanh(x)), x)], backend="jax")
    mean, grad = f(np.ones(4, np.float32))
    assert mean.dtype == np.float32 and grad.dtype == np.float32


def test_retraces_for_new_shapes():
    x = sg.matrix("x")
    f = sg.function([x], sg.reshape(x, (-1,)) * sg.mean(x, axis=0).sum(), backend="jax")
    for shape in [(2, 3), (4, 1), (0, 5)]:
        a = np.arange(np.prod(shape), dtype=float).reshape(shape)
        np.testing.assert_allclose(f(a), sg.function([x], sg.reshape(x, (-1,)) * sg.mean(x, axis=0).sum())(a))


def test_nodes_are_the_optimized_graph():
    x = sg.vector("x")
    f = sg.function([x], sg.exp(x) + 1.0, backend="jax")
    assert [n.op.name for n in f.nodes] == [n.op.name for n in sg.function([x], sg.exp(x) + 1.0).nodes]


# -- errors ------------------------------------------------------------------------------------------------
def test_unknown_backend_names_the_choices():
    x = sg.vector("x")
    with pytest.raises(sg.StableGradError, match=r"unknown backend 'tpu' \(available: 'numpy', 'jax', 'numba'\)"):
        sg.function([x], x + 1, backend="tpu")


def test_shard_needs_the_jax_backend():
    x = sg.vector("x")
    with pytest.raises(sg.StableGradError, match="shard= needs backend='jax'"):
        sg.function([x], x + 1, shard={x: 0})


def test_check_finite_is_refused_by_the_jax_backend_not_dropped():
    x = sg.vector("x")
    with pytest.raises(sg.StableGradError, match=r"check_finite=True needs backend='numpy' \(got backend='jax'\)"):
        sg.function([x], sg.log(x), backend="jax", check_finite=True)


def test_shard_on_a_non_input_is_an_error():
    x, y = sg.vector("x"), sg.vector("y")
    with pytest.raises(sg.InputError, match=r"shard names <y: float64.*not among the function's inputs"):
        sg.function([x], x + 1, backend="jax", shard={y: 0})


def test_shard_axis_out_of_range_is_an_error():
    x = sg.matrix("x")
    with pytest.raises(sg.ShapeError, match="shard axis 2 is out of range for input 'x' of 2 dimensions"):
        sg.function([x], x + 1, backend="jax", shard={x: 2})


def test_data_dependent_shape_is_a_clear_error():
    x = sg.vector("x")
    f = sg.function([x], x[x > 0], backend="jax")
    with pytest.raises(sg.ShapeError, match="boolean mask must be known when compiling") as info:
        f(np.array([1.0, -1.0]))
    assert info.value.location is not None and info.value.location[0] == __file__  # the user's line, not JAX's


def test_scan_carry_changing_shape_is_an_execution_error():
    init, xs = sg.tensor("init", shape=(None,)), sg.vector("xs")
    f = sg.function([init, xs], sg.scan(lambda c, x: (sg.concatenate([c, x[None]]), None), init, xs)[0], backend="jax")
    with pytest.raises(sg.ExecutionError, match=r"changed the shape of carry 0 from \(2,\) to \(3,\) at step 0"):
        f(np.zeros(2), np.zeros(3))


def test_labels_out_of_range_is_an_error_at_run_time():
    x, y = sg.matrix("x"), sg.vector("y", dtype="int64")
    f = sg.function([x, y], softmax_cross_entropy(x, y), backend="jax")
    np.testing.assert_allclose(f(np.zeros((2, 3)), np.array([0, 2])), [np.log(3.0)] * 2, rtol=1e-15)
    with pytest.raises(sg.ExecutionError, match=r"labels must lie in \[0, 3\) \(the number of classes\), got 3"):
        f(np.zeros((2, 3)), np.array([0, 3]))


def test_empty_max_is_an_error_as_in_numpy():
    x = sg.vector("x")
    with pytest.raises(sg.ExecutionError, match="zero-size array"):
        sg.function([x], sg.max(x), backend="jax")(np.zeros(0))


def test_op_without_lowering_fails_at_compile_time():
    class Twice(Op):
        def infer(self, x):
            return [x.type]

        def perform(self, x):
            return 2 * x

    x = sg.vector("x")
    with pytest.raises(sg.StableGradError, match=r"op 'twice' .* has no lowering"):
        sg.function([x], Twice()(x), backend="jax")


def test_missing_jax_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "stablegrad.backends.jax_backend", None)
    x = sg.vector("x")
    with pytest.raises(sg.StableGradError, match=r"backend='jax' needs JAX.*stablegrad\[jax\]"):
        sg.function([x], x + 1, backend="jax")


# -- many devices: four simulated CPU devices in a subprocess ------------------------------------------------
SHARDED_SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np, stablegrad as sg
    assert len(jax.devices()) == 4, jax.devices()
    x, w = sg.matrix("x"), sg.matrix("w")
    logits = x @ w
    loss = sg.mean(sg.log(sg.sum(sg.exp(logits), axis=1)) - logits[:, 0])
    outs = [loss, sg.grad(loss, w), sg.tanh(logits)]
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((64, 16)), rng.standard_normal((16, 8))
    reference = sg.function([x, w], outs)(xv, wv)
    single = sg.function([x, w], outs, backend="jax")(xv, wv)
    sharded_fn = sg.function([x, w], outs, backend="jax", shard={x: 0})
    sharded = sharded_fn(xv, wv)
    for r, s, m in zip(reference, single, sharded):
        assert m.dtype == r.dtype and m.shape == r.shape
        np.testing.assert_allclose(m, s, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(m, r, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(sharded[2], single[2])  # elementwise: bit for bit
    col = sg.function([x, w], outs, backend="jax", shard={w: 1})(xv, wv)
    for s, c in zip(single, col):
        np.testing.assert_allclose(c, s, rtol=1e-13, atol=1e-15)
    try:
        sharded_fn(xv[:62], wv)
    except sg.InputError as exc:
        assert "not a multiple of 4" in str(exc), exc
    else:
        raise AssertionError("an extent not divisible by the device count was accepted")
    v, y = sg.matrix("v"), sg.vector("y", dtype="int64")
    tails = np.full((64, 300), -40.0)  # every row needs the exact rerun; big enough to speculate
    tails[:, 7] = 0.0
    lse = sg.function([v], sg.logsumexp(v, axis=1), backend="jax", shard={v: 0})(tails)
    np.testing.assert_allclose(lse, 299 * np.exp(-40.0), rtol=1e-14)
    xent = sg.function([v, y], sg.softmax_cross_entropy(v, y), backend="jax", shard={v: 0, y: 0})
    try:
        xent(tails, np.arange(64) + 250)
    except sg.ExecutionError as exc:
        assert "labels must lie in [0, 300)" in str(exc) and "got 300" in str(exc), exc
    else:
        raise AssertionError("labels out of range were accepted when sharded")
    print("sharded ok")
    """
)


def test_sharded_over_four_devices_matches_one_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", SHARDED_SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sharded ok" in result.stdout


def test_equal_products_cancel_exactly_despite_fused_multiply_add():
    """XLA would contract `a*b - a*c` into fma(a, b, -a*c): the rounding error of a*c, not 0."""
    a, b, c = sg.vector("a"), sg.vector("b"), sg.vector("c")
    f = sg.function([a, b, c], [a * b - a * c, a / b - a / c], backend="jax")
    x, y = normal(1000), positive(1000)
    for difference in f(x, y, y):
        assert np.all(difference == 0)


def test_only_products_an_addition_could_contract_are_guarded():
    """A product that only other products read (or that leaves the program) cannot meet an
    addition inside a fused multiply-add: it skips the rounding guard, and the products of
    it that a subtraction reads keep theirs, so equal ones still cancel exactly."""
    from stablegrad.backends.jax_backend.lowerings import lower_ufunc, lower_ufunc_unguarded

    a, b, c, d = (sg.vector(name) for name in "abcd")
    inner_b, inner_c = a * b, a * c  # read by products only
    out = [inner_b * d - inner_c * d, inner_b / d - inner_c / d, inner_b]
    f = sg.function([a, b, c, d], out, backend="jax")
    lowering = {node.outputs[0].id: fn for node, fn in f._program.plan.steps}
    products = [n for n in f.nodes if n.op.name in ("multiply", "divide")]
    inner = [n for n in products if n.inputs[0] is a]
    assert len(inner) == 2 and all(lowering[n.outputs[0].id] is lower_ufunc_unguarded for n in inner)
    assert all(lowering[n.outputs[0].id] is lower_ufunc for n in products if n not in inner)
    x, y, z = normal(1000), positive(1000), normal(1000)
    for difference in f(x, y, y, z)[:2]:
        assert np.all(difference == 0)


def test_logsumexp_of_x_and_of_minus_x_on_equal_rows_has_an_exactly_zero_gradient():
    """softmax(x) - softmax(-x) = 1/n - 1/n on a row of equal entries, as on NumPy."""
    x, w = sg.matrix("x"), sg.vector("w")
    total = sg.sum(w * (sg.logsumexp(x, axis=-1) + sg.logsumexp(-x, axis=-1)))
    rows = np.array([0.0, 1000.0, -1000.0])[:, None] * np.ones((1, 5))
    (g,) = sg.function([x, w], sg.grad(total, [x]), backend="jax")(rows, normal(3))
    assert np.all(g == 0)


def test_logsumexp_hessian_vector_product_at_a_one_hot_softmax_is_exactly_zero_at_the_max():
    x, w, v = sg.matrix("x"), sg.vector("w"), sg.matrix("v")
    (g,) = sg.grad(sg.sum(w * sg.logsumexp(x, axis=-1)), [x])
    (hvp,) = sg.grad(sg.sum(g * v), [x])
    spread = -800 + normal(3, 5)
    spread[np.arange(3), [4, 0, 2]] = 800 + normal(3)
    args = (spread, normal(3), normal(3, 5))
    got = sg.function([x, w, v], hvp, backend="jax")(*args)
    np.testing.assert_array_equal(got, sg.function([x, w, v], hvp)(*args))
    assert np.all(got == 0)


# -- logsumexp and its gradient lowered whole: both sides of the branch ----------------------------------
def _big_rows(fill: float, tail: float | None = None) -> np.ndarray:
    """A (200, 100) array, big enough for the branch (`EXACT_BELOW`): rows of `fill` +
    noise, optionally one entry 0 and the rest at `tail` below it, plus edge rows."""
    from stablegrad.backends.jax_backend.whole import EXACT_BELOW

    x = fill + normal(200, 100)
    if tail is not None:
        x[:100] = tail
        x[:100, 7] = 0.0
    x[150] = -np.inf
    x[151, 3] = np.inf
    x[152, :50] = -np.inf
    x[153, 9] = np.nan
    assert x.size >= EXACT_BELOW
    return x


@pytest.mark.parametrize(
    "x",
    [_big_rows(50.0), _big_rows(-50.0), _big_rows(0.0, tail=-40.0), _big_rows(0.0, tail=-3.0)],
    ids=["large", "very negative", "tiny tails", "unique max under 2"],
)
def test_logsumexp_and_its_gradient_lowered_whole_match_numpy_on_either_branch(x):
    v, w = sg.matrix("x"), sg.vector("w")
    lse = sg.logsumexp(v, axis=1)
    (g,) = sg.grad(sg.sum(w * lse), [v])
    outputs = [lse, g]
    weights = normal(200)
    ours = sg.function([v, w], outputs, backend="jax")
    kept = {type(n.op).__name__ for n in ours.nodes}
    assert {"LogSumExp", "LogSumExpGrad"} <= kept  # lowered whole, not through their bodies
    with np.errstate(all="ignore"):
        expected = sg.function([v, w], outputs)(x, weights)
    for got, want in zip(ours(x, weights), expected):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize(
    ("result", "reruns"),
    [(0.999, True), (-0.999, True), (0.5, True), (1.01, False), (-1.01, False), (-1.9, False), (3.0, False)],
)
def test_a_unique_max_reruns_exactly_where_its_logsumexp_is_under_one_in_magnitude(result, reruns):
    """The doubt bounds m + log(s) by m + (s-1)/s and m + (s-1): every row whose result is
    under 1 in magnitude (with its tail at 1e-3 of the max's weight) reruns, and rows past
    it by 1 % do not."""
    v = sg.matrix("x")
    lse = sg.logsumexp(v, axis=1)
    outputs = [lse, *sg.grad(sg.sum(lse), [v])]
    f = sg.function([v], outputs, backend="jax")
    tail = np.log(1e-3 / 99)  # 99 entries that add 1e-3 to the max's exp(0)
    x = np.full((200, 100), tail)
    x[:, 0] = 0.0
    x += result - np.log1p(1e-3)  # each row's logsumexp is `result`
    got = f(x)
    assert (f._program._exact is not None) == reruns
    np.testing.assert_allclose(got[0], result, rtol=2e-16 * 4)
    for g, e in zip(got, sg.function([v], outputs)(x)):
        np.testing.assert_allclose(g, e, rtol=1e-14)


@pytest.mark.parametrize("rare", ["tiny tails", "+inf entry"])
def test_the_exact_program_is_compiled_only_when_a_call_needs_it(rare):
    """Rows far from 0 keep `jax.nn`'s cheap form; a row with a tiny tail at 0 (`[0, -40, ...]`)
    or a +inf entry (which the cheap form's per-row shift would turn into inf - inf) makes
    that call, and only that one, rerun exactly."""
    v = sg.matrix("x")
    lse = sg.logsumexp(v, axis=1)
    f = sg.function([v], [lse, *sg.grad(sg.sum(lse), [v])], backend="jax")
    on_numpy = sg.function([v], [lse, *sg.grad(sg.sum(lse), [v])])
    plain = _big_rows(50.0)
    plain[151, 3] = 50.0  # (no +inf entry)
    for got, expected in zip(f(plain), on_numpy(plain)):
        np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert f._program._exact is None
    rerun = _big_rows(0.0, tail=-40.0) if rare == "tiny tails" else _big_rows(50.0)
    with np.errstate(invalid="ignore"):
        got, expected = f(rerun), on_numpy(rerun)
    assert f._program._exact is not None
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_allclose(g, e, rtol=1e-14)
    if rare == "tiny tails":
        assert got[0][0] == pytest.approx(99 * np.exp(-40.0), rel=1e-14)  # m + log(s) would give exactly 0
    else:
        assert got[0][151] == np.inf and got[1][151, 3] == 1.0  # the +inf entry takes the row's mass
    for got, expected in zip(f(plain), on_numpy(plain)):
        np.testing.assert_allclose(got, expected, rtol=1e-14)


@pytest.mark.parametrize("tail", [-40.0, -3.0], ids=["tiny tails", "unique max under 2"])
def test_logsumexp_in_a_loop_step_keeps_tiny_tails(tail):
    """A doubt could not leave `lax.scan`'s step, so steps stay exact: the tail that
    `m + log(s)` rounds away still shows (as on NumPy)."""
    xs = np.stack([_big_rows(50.0), _big_rows(0.0, tail=tail), _big_rows(-50.0)])

    def step(total, x):
        return total + sg.logsumexp(x, axis=1), None

    v = sg.tensor("xs", shape=(None, None, None))
    final, _ = sg.scan(step, sg.zeros(200), v)
    with np.errstate(all="ignore"):
        expected = sg.function([v], final)(xs)
    got = sg.function([v], final, backend="jax")(xs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-300)


def _softmax_family(v, labels):
    return {
        "softmax": sg.softmax(v, axis=1),
        "log_softmax": sg.log_softmax(v, axis=1),
        "xent (indices)": sg.softmax_cross_entropy(v, labels),
        "xent (probabilities)": sg.softmax_cross_entropy(v, sg.softmax(-v, axis=1)),
    }


@pytest.mark.parametrize(
    "x",
    [_big_rows(50.0), _big_rows(0.0, tail=-40.0), _big_rows(0.0, tail=-3.0)],
    ids=["large", "tiny tails", "unique max under 2"],
)
@pytest.mark.parametrize("name", list(_softmax_family(sg.matrix(), sg.vector(dtype="int64"))))
def test_the_softmax_family_lowered_whole_matches_numpy_with_its_gradient(name, x):
    """One max and one sum of exp, plus the rest of the row where s < 2: the confident
    row [0, -40, ...] keeps log_softmax's max entry -99·e⁻⁴⁰, not 0; edge rows as on NumPy."""
    v, labels, w = sg.matrix("x"), sg.vector("labels", dtype="int64"), sg.matrix("w")
    out = _softmax_family(v, labels)[name]
    (g,) = sg.grad(sg.sum(out * (w if out.ndim == 2 else w[:, 0])), [v])
    ours = sg.function([v, labels, w], [out, g], backend="jax")
    kind = type(out.owner.op).__name__ if out.owner else ""
    assert kind in {type(n.op).__name__ for n in ours.nodes}  # lowered whole, not through its body
    args = (x, np.arange(200) % 100, normal(200, 100))
    with np.errstate(all="ignore"):
        expected = sg.function([v, labels, w], [out, g])(*args)
    (value, grad), (want_value, want_grad) = ours(*args), expected
    np.testing.assert_array_equal(np.isnan(value), np.isnan(want_value))
    np.testing.assert_allclose(value, want_value, rtol=1e-14, atol=0)
    np.testing.assert_array_equal(np.isnan(grad), np.isnan(want_grad))
    scale = np.max(np.abs(want_grad[np.isfinite(want_grad)]))  # p·(g - Σ g·p) cancels: error ~ eps·scale
    np.testing.assert_allclose(grad, want_grad, rtol=1e-14, atol=1e-14 * scale)


@pytest.mark.parametrize("budget", [None, 0], ids=["hoisted", "over budget: step by step"])
def test_a_pullback_loop_runs_its_carry_free_work_batched_before_the_loop(budget, monkeypatch):
    """The HMM's backward step recomputes softmax(alpha[:, None] + log_a) from the stored
    alphas, which needs no backward carry: it runs once, vmapped over all steps, and the
    loop keeps the rest.  Either way the numbers are NumPy's."""
    from stablegrad.backends.jax_backend import trace

    if budget is not None:
        monkeypatch.setattr(trace, "HOIST_BUDGET", budget)
    a, b, p = sg.matrix("log_a"), sg.matrix("log_b"), sg.vector("log_pi")
    ll = _hmm(a, b, p)
    outputs = [ll, *sg.grad(ll, [a, b, p])]
    args = (normal(4, 4), normal(30, 4, scale=3), normal(4))
    ours = sg.function([a, b, p], outputs, backend="jax")
    backward = [n.op for n in ours.nodes if isinstance(n.op, Scan) and n.op.reverse]
    assert backward
    split = trace.hoisted_step(backward[0])
    assert split.hoisted and len(split.step.nodes) < len(trace.inner_plan(backward[0]).nodes)
    for got, want in zip(ours(*args), sg.function([a, b, p], outputs)(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("on_carry", [True, False], ids=["in the step", "in the batched prologue"])
def test_a_check_inside_a_loop_reports_the_first_bad_label_and_the_users_line(on_carry):
    """Labels checked per step come out of `lax.scan` (or the vmapped carry-free part) stacked;
    the call raises once, with the first bad label and the line that built the loss."""
    xs, ys = sg.tensor("xs", shape=(None, None, None)), sg.matrix("ys", dtype="int64")

    def step(total, x_and_y):
        x, y = x_and_y
        logits = x + total[:, None] if on_carry else x
        return total + sg.softmax_cross_entropy(logits, y), None

    final, _ = sg.scan(step, sg.zeros(2), [xs, ys])
    f = sg.function([xs, ys], final, backend="jax")
    x_value = normal(4, 2, 3)
    good = np.array([[0, 2], [1, 1], [2, 0], [0, 0]])
    np.testing.assert_allclose(f(x_value, good), sg.function([xs, ys], final)(x_value, good), rtol=1e-13)
    bad = good.copy()
    bad[2, 1], bad[3, 0] = 7, -1
    with pytest.raises(sg.ExecutionError, match=r"labels must lie in \[0, 3\).*got 7.*test_jax.py"):
        f(x_value, bad)


@pytest.mark.parametrize(
    ("build", "args"),
    [
        (lambda x, i: x[i], (np.arange(3.0), np.array([5]))),
        (lambda x, i: x[i], (np.arange(3.0), np.array([-4, 0]))),
        (lambda x, i: x.at[i].add(1.0), (np.arange(3.0), np.array([3]))),
        (lambda x, i: x.at[i].set(0.0), (np.arange(3.0), np.array([0, 7]))),
    ],
    ids=["gather", "negative", "scatter-add", "scatter-set"],
)
def test_an_index_out_of_bounds_raises_the_same_error_on_both_backends(build, args):
    x, i = sg.vector("x"), sg.vector("i", dtype="int64")
    messages = []
    for backend in ("numpy", "jax"):
        with pytest.raises(sg.ExecutionError) as info:
            sg.function([x, i], build(x, i), backend=backend)(*args)
        messages.append(info.value.message.split(" (operands")[0])
        assert info.value.location is not None and info.value.location[0] == __file__
    assert messages[0] == messages[1] and "is out of bounds for axis 0 with size 3" in messages[0]


def test_indices_in_bounds_agree_on_both_backends():
    x, i = sg.matrix("x"), sg.vector("i", dtype="int64")
    out = x[:, i] + x.at[:, i].add(1.0)[:, i]
    args = (np.arange(6.0).reshape(2, 3), np.array([-3, 2, 0]))
    np.testing.assert_array_equal(sg.function([x, i], out, backend="jax")(*args), sg.function([x, i], out)(*args))


# -- what a call costs besides the computation --------------------------------------------------------------
def _misaligned(array: np.ndarray) -> np.ndarray:
    """A copy of `array` that starts 16 bytes past a 64-byte boundary (as NumPy's allocations do)."""
    from stablegrad.backends.jax_backend.program import ALIGN

    raw = np.empty(array.nbytes + 2 * ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN + 16
    out = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def test_a_large_misaligned_argument_is_staged_in_aligned_memory_and_results_stay_the_callers():
    """XLA reads a host array in place only at 64-byte alignment; otherwise the argument is
    copied into the program's aligned buffer.  The next call rewrites that buffer, so no
    result may share it: an output that is the argument itself keeps its values."""
    from stablegrad.backends.jax_backend.program import ALIGN, STAGE_FROM

    x = sg.matrix("x")
    f = sg.function([x], [x, 2.0 * x], backend="jax")
    first, second = (_misaligned(normal(64, 128)) for _ in range(2))
    assert first.nbytes >= STAGE_FROM and first.ctypes.data % ALIGN
    out_first = f(first)
    out_second = f(second)
    buffers = f._program._staging._buffers
    assert set(buffers) == {0} and buffers[0].ctypes.data % ALIGN == 0
    for got, want in zip(out_first + out_second, [first, 2 * first, second, 2 * second]):
        np.testing.assert_array_equal(got, want)
        assert not np.may_share_memory(got, buffers[0])
    strided = normal(64, 256)[:, ::2]  # not contiguous: staged as well
    np.testing.assert_array_equal(f(strided)[1], 2 * strided)


def test_a_program_whose_arguments_are_all_known_to_be_small_skips_the_staging():
    """Staging costs a few µs a call (a third of an unrolled HMM's overhead); arguments
    known to be under `STAGE_FROM` bytes never need it, an unknown extent might."""
    from stablegrad.backends.jax_backend.program import STAGE_FROM

    side = int(np.sqrt(STAGE_FROM / 8)) - 1  # float64: just under the threshold
    small, large, unknown = sg.tensor("s", (side, side)), sg.tensor("l", (side + 2, side + 2)), sg.matrix("u")
    for inputs, stages in [([small], False), ([small, large], True), ([small, unknown], True)]:
        f = sg.function(inputs, [2.0 * v for v in inputs], backend="jax")
        assert f._program._stages is stages
        values = [_misaligned(normal(*(n or side for n in v.type.shape))) for v in inputs]
        for got, value in zip(f(*values), values):
            np.testing.assert_array_equal(got, 2.0 * value)
        assert set(f._program._staging._buffers) == (
            {1} if any(v is large for v in inputs) else set()
        )  # only the large one copied


def test_only_products_that_the_program_reads_keep_their_rounding_guard():
    """`a*b` that only leaves the program needs no guard against fused multiply-adds; one
    that a subtraction reads keeps it (the difference of equal products is exactly 0)."""
    from stablegrad.backends.jax_backend.lowerings import lower_ufunc, lower_ufunc_unguarded

    a, b, c = sg.vector("a"), sg.vector("b"), sg.vector("c")
    ab = a * b
    f = sg.function([a, b, c], [ab, ab - a * c], backend="jax")
    lowerings = {type(n.op).__name__: [] for n in f.nodes}
    for node, lower in f._program.plan.steps:
        lowerings[type(node.op).__name__].append(lower)
    assert lowerings["Multiply"].count(lower_ufunc) == 2  # both read by the subtraction
    g = sg.function([a, b], a * b, backend="jax")
    assert [lower for _, lower in g._program.plan.steps] == [lower_ufunc_unguarded]
    x, y = normal(1000), positive(1000)
    product, difference = f(x, y, y)
    np.testing.assert_array_equal(product, x * y)
    assert np.all(difference == 0)
    np.testing.assert_array_equal(g(x, y), x * y)


def test_logsumexp_results_of_size_one_or_more_keep_the_cheap_program():
    """A Gaussian mixture's log-densities: nearly every row has one dominant component
    (a total under 2) and a result near -2.  Rounding 1 + rest moves log(s) by at most
    eps/2, under half an ulp of such a result, so no call reruns exactly; the values and
    the gradient are NumPy's."""
    from stablegrad.backends.jax_backend.whole import EXACT_BELOW

    data = np.concatenate([RNG.normal(-4, 0.5, 3000), RNG.normal(5, 1.0, 3000)])
    mu, sd = np.array([-4.0, 0.0, 5.0]), np.array([0.5, 1.0, 1.0])
    lp = np.log(1 / 3) - np.log(sd) - 0.5 * np.log(2 * np.pi) - 0.5 * ((data[:, None] - mu) / sd) ** 2
    assert lp.size >= EXACT_BELOW
    x, w = sg.matrix("x"), sg.vector("w")
    lse = sg.logsumexp(x, axis=1)
    outputs = [lse, *sg.grad(sg.sum(w * lse), [x])]
    f = sg.function([x, w], outputs, backend="jax")
    weights = positive(len(lp))
    got = f(lp, weights)
    assert f._program._exact is None
    m = lp.max(axis=1)
    assert np.mean(np.exp(lp - m[:, None]).sum(axis=1) < 2) > 0.9  # the rows the old test (|m| < 4) reran
    for value, want in zip(got, sg.function([x, w], outputs)(lp, weights)):
        np.testing.assert_allclose(value, want, rtol=1e-14, atol=0)
    near_zero = lp.copy()
    near_zero[0] = [0.0, -40.0, -40.0]  # result 4e-18: m + log(s) would round it to 0
    assert f(near_zero, weights)[0][0] == pytest.approx(2 * np.exp(-40.0), rel=1e-14)
    assert f._program._exact is not None


@pytest.mark.parametrize("size, sums", [((8, 8), 2), ((300, 100), 1)], ids=["exact", "speculating"])
def test_a_logsumexp_and_its_gradient_emit_one_max_and_exp(size, sums):
    """The two lowerings of one x share their max, exp and sums within the trace: XLA gets a
    program with one of each, not two for its common-subexpression pass to merge (an unrolled
    HMM's gradient emitted half again as many reductions as `jax.jit` of the same model).
    Below `EXACT_BELOW` entries the gradient divides by the logsumexp's own ties + rest."""
    from stablegrad.backends.jax_backend.program import _x64

    x, w = sg.matrix("x"), sg.vector("w")
    lse = sg.logsumexp(x, axis=0)
    outputs = [lse, *sg.grad(sg.sum(w * lse), [x])]
    f = sg.function([x, w], outputs, backend="jax")
    data, weights = RNG.normal(scale=20, size=size), positive(size[1])
    with _x64():
        text = f._program._cheap.lower(data, weights).as_text()
    assert text.count("stablehlo.exponential") == 1
    assert text.count("applies stablehlo.maximum") == 1
    assert text.count("applies stablehlo.add") == sums  # ties and rest, or the plain total
    for got, want in zip(f(data, weights), sg.function([x, w], outputs)(data, weights)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("rows", [1, 5000], ids=["exact", "speculating"])
def test_a_nan_among_minus_infinities_makes_the_logsumexp_gradient_nan(rows):
    """XLA's CPU max can pass over a NaN and report -inf for `[-inf, nan, -inf]`; the
    gradient of such a row is NaN throughout, as on NumPy, not the 0 of an empty row."""
    x, w = sg.matrix("x"), sg.vector("w")
    lse = sg.logsumexp(x, axis=1)
    outputs = [lse, *sg.grad(sg.sum(w * lse), [x])]
    block = np.array([[-np.inf, np.nan, -np.inf], [np.nan, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [1.0, 0.0, 1.0]])
    data = np.tile(block, (rows, 1))
    weights = np.ones(len(data))
    with np.errstate(all="ignore"):
        expected = sg.function([x, w], outputs)(data, weights)
    for got, want in zip(sg.function([x, w], outputs, backend="jax")(data, weights), expected):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
