"""A jaxpr imported into our graph: each JAX primitive becomes the stablegrad op that computes it.

`import_jaxpr(closed, inputs)` walks the equations of a `jax.make_jaxpr` result and
builds our nodes on the symbolic `inputs`, returning the symbolic outputs.  Once the
formula is our graph, the rewrite pipeline can recognise `log(sum(exp(x)))` in it
exactly as it would in code written with `sg.` functions.  A primitive without a
counterpart here becomes a `JaxCall` node (`opaque`): JAX runs and differentiates it.

Each node is built inside `errors.attributed_to` the user's line that the equation
came from (JAX keeps a traceback per equation), so `explain` names *their* source.

>>> import jax, jax.numpy as jnp, stablegrad as sg
>>> closed = jax.make_jaxpr(lambda x: jnp.log(jnp.sum(jnp.exp(x))))(jnp.zeros(3))
>>> x = sg.tensor("x", shape=(3,))  # the shapes JAX traced
>>> (out,) = import_jaxpr(closed, [x])
>>> float(sg.function([x], out)([1000.0, 1000.0, 1000.0])) > 1000
True
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax._src import source_info_util

from ..errors import StableGradError, attributed_to, user_location
from ..graph.basic import Constant, Variable, constant
from ..graph.types import TensorType
from ..ops import elementwise as ew
from ..ops import linalg, math, reduction, shape
from ..ops.gradient_mask import masked_gradient
from ..ops.scan import scan
from ..ops.stable import sigmoid
from .opaque import JaxCall


class UnsupportedPrimitive(StableGradError):
    """A jaxpr holds a primitive that has no stablegrad counterpart (`primitive` names it)."""

    def __init__(self, primitive: str, location: tuple[str, int] | None = None, why: str = ""):
        super().__init__(f"JAX primitive {primitive!r} {why or 'has no stablegrad counterpart'}", location=location)
        self.primitive = primitive


def import_jaxpr(closed, inputs: Sequence[Variable], const_inputs: dict[int, Variable] | None = None) -> list[Variable]:
    """The outputs of the `ClosedJaxpr` `closed`, built as our graph on the symbolic `inputs`.

    `const_inputs` gives symbolic inputs for some of its constants (by position): the
    values that are not known while tracing (a tracer that the function closes over).
    """
    given = const_inputs or {}
    consts = [given[k] if k in given else constant(np.asarray(c)) for k, c in enumerate(closed.consts)]
    return _run(closed.jaxpr, [*consts, *inputs])


def _run(jaxpr, args: Sequence[Variable]) -> list[Variable]:
    """The outputs of an open `Jaxpr` whose constvars and invars take `args`, in that order."""
    env: dict[Any, Variable] = {}
    for var, value in zip([*jaxpr.constvars, *jaxpr.invars], args, strict=True):
        env[var] = value

    def read(atom) -> Variable:
        if hasattr(atom, "val"):  # a Literal: a constant in the equation itself
            return constant(np.asarray(atom.val, dtype=atom.aval.dtype))
        return env[atom]

    # broadcast_in_dim results → the operand before its explicit broadcast (unit axes inserted only):
    # `exp(x) / sum(exp(x))` reads as the pattern `exp(x) / sum(exp(x), keepdims=True)` only so
    unbroadcast: dict[int, Variable] = {}
    for eqn in jaxpr.eqns:
        location = user_line(eqn) or user_location()  # (an inlined call's equations may have none: the call's)
        name = eqn.primitive.name
        build = PRIMITIVES.get(name)
        operands = [read(a) for a in eqn.invars]
        with attributed_to(location):
            try:
                results = _built(build, eqn, operands, unbroadcast) if build is not None else None
            except UnsupportedPrimitive:  # (a form of it we cannot express, or a loop body that holds one)
                results = None
            if results is None:
                results = _kept_as_jax(eqn, operands, location)
            results = [_conform(r, v.aval, name) for r, v in zip(results, eqn.outvars, strict=True)]
        for var, value in zip(eqn.outvars, results):
            env[var] = value
    return [read(a) for a in jaxpr.outvars]


def _built(build: Builder, eqn, operands: list[Variable], unbroadcast: dict[int, Variable]) -> list[Variable]:
    name = eqn.primitive.name
    if name in BROADCASTING:
        operands = _implicitly_broadcast(operands, unbroadcast, tuple(eqn.outvars[0].aval.shape))
    results = build(operands, eqn.params)
    results = results if isinstance(results, list) else [results]
    if name == "broadcast_in_dim" and results[0].owner is not None and results[0] is not operands[0]:
        unbroadcast[results[0].id] = _unit_axes_inserted(operands[0], eqn.params)
    return results


def _kept_as_jax(eqn, operands: list[Variable], location) -> list[Variable]:
    """The equation as a `JaxCall` node: JAX runs and differentiates it, the rewrites pass it by.
    Raises UnsupportedPrimitive where a result is not an array of a NumPy dtype (a PRNG key, a token)."""
    types = []
    for v in eqn.outvars:
        shape_ = getattr(v.aval, "shape", None)
        try:
            dtype = np.dtype(v.aval.dtype)
        except (TypeError, AttributeError):
            dtype = None
        if shape_ is None or dtype is None:
            raise UnsupportedPrimitive(eqn.primitive.name, location, f"returns a {v.aval}, which our graph cannot hold")
        types.append(TensorType(dtype, tuple(shape_)))
    results = JaxCall(eqn.primitive, dict(eqn.params), tuple(types))(*operands)
    return [results] if len(types) == 1 else list(results)


def _implicitly_broadcast(operands: list[Variable], unbroadcast: dict[int, Variable], declared: tuple) -> list:
    """The operands of an elementwise op with explicit broadcasts left to the op, where it
    broadcasts them to the same `declared` shape by itself."""
    relaxed = [unbroadcast.get(v.id, v) for v in operands]
    try:
        # (shapes here are static: make_jaxpr traced concrete extents)
        if tuple(np.broadcast_shapes(*(_static_shape(v) for v in relaxed))) != declared:
            relaxed = operands
    except ValueError:
        relaxed = operands
    # a computed operand of lower rank gets its leading unit axes written out, as NumPy's rule
    # reads it: `exp(x) / sum(exp(x))` then reads `exp(x) / sum(exp(x), keepdims=True)`, the
    # form the softmax pattern knows (constants stay: `1 + exp(x)` keeps its scalar)
    return [
        shape.expand_dims(v, tuple(range(len(declared) - v.ndim)))
        if v.ndim < len(declared) and not isinstance(v, Constant)
        else v
        for v in relaxed
    ]


def user_line(eqn) -> tuple[str, int] | None:
    """(file, line) of the user's code that traced this equation, or None when JAX kept no such frame."""
    frame = source_info_util.user_frame(eqn.source_info.traceback)
    return None if frame is None else (frame.file_name, frame.start_line)


def _conform(value: Variable, aval, primitive: str) -> Variable:
    """The result in the dtype JAX declared (NumPy promotion may differ from JAX's), its shape checked."""
    if tuple(value.type.shape) != tuple(aval.shape):
        raise StableGradError(
            f"importing {primitive!r}: built shape {value.type.shape}, but JAX declares {tuple(aval.shape)}"
        )
    dtype = np.dtype(aval.dtype)
    return value if value.dtype == dtype else ew.astype(value, dtype)


# -- the table: primitive name → builder(operands, params) ----------------------------------------------------
Builder = Callable[[list[Variable], dict], "Variable | list[Variable]"]


def _unary(fn: Callable) -> Builder:
    return lambda xs, params: fn(xs[0])


def _binary(fn: Callable) -> Builder:
    return lambda xs, params: fn(xs[0], xs[1])


def _reduce(fn: Callable) -> Builder:
    return lambda xs, params: fn(xs[0], axis=tuple(params["axes"]))


def _static_shape(v: Variable) -> tuple[int, ...]:
    return tuple(int(d) if d is not None else -1 for d in v.type.shape)


def _unit_axes_inserted(x: Variable, params: dict) -> Variable:
    """x with a unit axis at each position of broadcast_in_dim's result that x does not map to."""
    target, kept = tuple(params["shape"]), tuple(params["broadcast_dimensions"])
    new_axes = tuple(d for d in range(len(target)) if d not in kept)
    # (broadcast_in_dim keeps the operand's axes in order, so this is an expand_dims)
    return shape.expand_dims(x, new_axes) if new_axes else x


def _broadcast_in_dim(xs, params):
    y = _unit_axes_inserted(xs[0], params)
    target = tuple(params["shape"])
    return shape.broadcast_to(y, target) if tuple(y.type.shape) != target else y


def _reshape(xs, params):
    if params.get("dimensions") is not None:
        raise UnsupportedPrimitive("reshape with dimensions")
    return shape.reshape(xs[0], tuple(params["new_sizes"]))


def _select_n(xs, params):
    """select_n(which, *cases): case k where `which` equals k (a bool `which` picks between two)."""
    which, cases = xs[0], xs[1:]
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return ew.where(which, cases[1], cases[0])
    result = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        result = ew.where(ew.equal(which, k), cases[k], result)
    return result


def _dot_general(xs, params):
    """dot_general as an einsum: batch axes first, then the free axes of each operand (JAX's order)."""
    a, b = xs
    (a_contract, b_contract), (a_batch, b_batch) = params["dimension_numbers"]
    letters = iter(string.ascii_letters)
    a_terms = [next(letters) for _ in range(a.ndim)]
    b_terms = [next(letters) for _ in range(b.ndim)]
    for i, j in zip([*a_contract, *a_batch], [*b_contract, *b_batch]):
        b_terms[j] = a_terms[i]
    batch = [a_terms[i] for i in a_batch]
    a_free = [a_terms[i] for i in range(a.ndim) if i not in a_contract and i not in a_batch]
    b_free = [b_terms[j] for j in range(b.ndim) if j not in b_contract and j not in b_batch]
    spec = f"{''.join(a_terms)},{''.join(b_terms)}->{''.join(batch + a_free + b_free)}"
    return linalg.einsum(spec, a, b)


def _slice(xs, params):
    strides = params.get("strides") or (1,) * xs[0].ndim
    index = tuple(slice(lo, hi, s) for lo, hi, s in zip(params["start_indices"], params["limit_indices"], strides))
    return xs[0][index]


def _stop_gradient(xs, params):
    # the value, with a gradient that is 0 everywhere (a mask that never holds)
    return masked_gradient(xs[0], constant(False))


def _inline(param: str) -> Builder:
    """A call of an inner jaxpr (jit, custom_jvp_call, ...): its body imported in place.

    A custom_jvp/custom_vjp rule is dropped with it: the derivative is taken of our
    (stable) graph of the primal body instead.
    """

    def build(xs, params):
        inner = params[param]
        if hasattr(inner, "jaxpr"):  # a ClosedJaxpr
            return _run(inner.jaxpr, [*(constant(np.asarray(c)) for c in inner.consts), *xs])
        return _run(inner, xs)

    return build


def _scan(xs, params):
    """lax.scan → sg.scan, the body jaxpr imported once as the step function."""
    body = params["jaxpr"]
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    consts, init, seqs = xs[:n_consts], xs[n_consts : n_consts + n_carry], xs[n_consts + n_carry :]
    if not n_carry:
        raise UnsupportedPrimitive("scan without a carry")
    body_consts = [constant(np.asarray(c)) for c in body.consts]

    def step(carry, x):
        outs = _run(body.jaxpr, [*body_consts, *consts, *carry, *(x or ())])
        ys = tuple(outs[n_carry:])
        return tuple(outs[:n_carry]), (ys if ys else None)

    final, ys = scan(
        step, tuple(init), tuple(seqs) if seqs else None, length=params["length"], reverse=params["reverse"]
    )
    return [*final, *(ys or ())]


def _iota(xs, params):
    """0, 1, 2, ... along `dimension`, broadcast to `shape`: a constant (its shape is static)."""
    shape_, axis = tuple(params["shape"]), params["dimension"]
    counts = np.arange(shape_[axis], dtype=np.dtype(params["dtype"]))
    along = counts.reshape([n if d == axis else 1 for d, n in enumerate(shape_)])
    return constant(np.broadcast_to(along, shape_).copy())


def _integer_pow(xs, params):
    y = params["y"]
    return ew.square(xs[0]) if y == 2 else math.power(xs[0], constant(np.asarray(y, dtype=xs[0].dtype)))


def _clamp(xs, params):
    lo, x, hi = xs
    return ew.minimum(ew.maximum(x, lo), hi)


def _argmax(fn: Callable) -> Builder:
    def build(xs, params):
        (axis,) = params["axes"]
        return ew.astype(fn(xs[0], axis=axis), np.dtype(params["index_dtype"]))

    return build


#: elementwise primitives, which broadcast their operands themselves
BROADCASTING = frozenset(
    ["add", "add_any", "sub", "mul", "div", "max", "min", "pow", "eq", "ne", "lt", "le", "gt", "ge"]
    + ["and", "or", "select_n", "clamp"]
)

PRIMITIVES: dict[str, Builder] = {
    # elementwise
    "exp": _unary(math.exp),
    "exp2": _unary(math.exp2),
    "log": _unary(math.log),
    "log1p": _unary(math.log1p),
    "expm1": _unary(math.expm1),
    "logistic": _unary(sigmoid),
    "tanh": _unary(math.tanh),
    "sin": _unary(math.sin),
    "cos": _unary(math.cos),
    "tan": _unary(math.tan),
    "erf": _unary(math.erf),
    "erfc": _unary(math.erfc),
    "lgamma": _unary(math.gammaln),
    "digamma": _unary(math.digamma),
    "sqrt": _unary(ew.sqrt),
    "rsqrt": _unary(lambda x: ew.reciprocal(ew.sqrt(x))),
    "square": _unary(ew.square),
    "neg": _unary(ew.negative),
    "abs": _unary(ew.abs),
    "sign": _unary(ew.sign),
    "floor": _unary(ew.floor),
    "ceil": _unary(ew.ceil),
    "is_finite": _unary(ew.isfinite),
    "not": _unary(ew.logical_not),
    "integer_pow": _integer_pow,
    "add": _binary(ew.add),
    "add_any": _binary(ew.add),
    "sub": _binary(ew.subtract),
    "mul": _binary(ew.multiply),
    "div": _binary(ew.true_divide),
    "max": _binary(ew.maximum),
    "min": _binary(ew.minimum),
    "pow": _binary(math.power),
    "eq": _binary(ew.equal),
    "ne": _binary(ew.not_equal),
    "lt": _binary(ew.less),
    "le": _binary(ew.less_equal),
    "gt": _binary(ew.greater),
    "ge": _binary(ew.greater_equal),
    "and": _binary(ew.logical_and),
    "or": _binary(ew.logical_or),
    "clamp": _clamp,
    "select_n": _select_n,
    "convert_element_type": lambda xs, params: ew.astype(xs[0], np.dtype(params["new_dtype"])),
    "stop_gradient": _stop_gradient,
    "copy": _unary(lambda x: x),
    "copy_p": _unary(lambda x: x),
    # reductions
    "reduce_sum": _reduce(reduction.sum),
    "reduce_max": _reduce(reduction.max),
    "reduce_min": _reduce(reduction.min),
    "reduce_prod": _reduce(reduction.prod),
    "argmax": _argmax(reduction.argmax),
    "argmin": _argmax(reduction.argmin),
    # shapes
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "squeeze": lambda xs, params: shape.squeeze(xs[0], axis=tuple(params["dimensions"])),
    "expand_dims": lambda xs, params: shape.expand_dims(xs[0], tuple(params["dimensions"])),
    "transpose": lambda xs, params: shape.transpose(xs[0], tuple(params["permutation"])),
    "iota": _iota,
    "concatenate": lambda xs, params: shape.concatenate(xs, axis=params["dimension"]),
    "slice": _slice,
    # linear algebra
    "dot_general": _dot_general,
    # calls of inner jaxprs
    "pjit": _inline("jaxpr"),
    "jit": _inline("jaxpr"),
    "closed_call": _inline("call_jaxpr"),
    "core_call": _inline("call_jaxpr"),
    "remat": _inline("jaxpr"),
    "checkpoint": _inline("jaxpr"),
    "custom_jvp_call": _inline("call_jaxpr"),
    "custom_vjp_call": _inline("call_jaxpr"),
    "custom_vjp_call_jaxpr": _inline("fun_jaxpr"),
    # loops
    "scan": _scan,
}
