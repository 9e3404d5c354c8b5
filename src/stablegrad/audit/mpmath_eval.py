"""The mpmath evaluator: any graph at arbitrary precision, the yardstick of the audit.

Each op's reference semantics (its NumPy `perform`) re-implemented over object
arrays of `mpf`, so that `exp(1000)` is an ordinary number and a naive formula is
evaluated *exactly* (up to the working precision) instead of overflowing.  Float
variables hold object arrays of mpf; integer and boolean ones stay native NumPy
arrays (their arithmetic is already exact).

Extended reals, as IEEE without overflow: `exp(-inf) = 0`, `log(0) = -inf`,
`inf - inf = nan`, `0 * inf = nan`, `a / 0 = sign(a) * inf` (zero taken as +0),
`0 / 0 = nan`, `log` or `sqrt` of a negative number is `nan` (never complex).

`MPMATH_IMPLEMENTATIONS` maps an op class to `impl(op, *values)`.  Library and
user composites evaluate through their bodies and a `Scan` through its step
graph, all *as written* (no rewrite runs).  An op with no entry and float
operands is evaluated in float64 and listed in `Evaluator.approximated`.

mpmath is imported lazily: it is needed by this feature only (`pip install
'stablegrad[audit]'`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import StableGradError
from ..graph.basic import Apply, Constant, Op, Variable, toposort
from ..graph.types import is_floating
from ..ops.composite import OpFromGraph, SymbolicOp, body_of
from ..ops.scan import Scan
from ..ops.stable import _common
from ..ops.stable.logsumexp import LogCumSumExp
from .mpmath_scalars import _mpmath, _objects, elementwise, scalar_ops

#: op class -> impl(op, *values) returning one value or a tuple (one per output)
MPMATH_IMPLEMENTATIONS: dict[type, Callable[..., Any]] = {}

#: working precision (decimal digits) per dtype: a naive formula can cancel as many
#: digits as the dtype's exponent range spans (`log(1 + exp(-700))` keeps `exp(-700)`
#: only at > 304 digits)
DEFAULT_DPS = {"float64": 330, "float32": 80, "float16": 40}


# -- conversions ----------------------------------------------------------------------------------------
def to_mp(array) -> np.ndarray:
    """A NumPy array (any real dtype) as an object array of mpf (exact: every float is a dyadic rational)."""
    mpf = scalar_ops()["mpf"]
    a = np.asarray(array)
    out = np.empty(a.shape, dtype=object)
    flat = a.ravel()
    if a.dtype == object:
        values = [x if isinstance(x, type(mpf(0))) else mpf(x) for x in flat]
    elif a.dtype.kind in "biu":
        values = [mpf(int(x)) for x in flat]
    else:
        values = [mpf(float(x)) for x in flat]
    out.reshape(-1)[:] = values if values else []
    return out


def to_float(array, dtype="float64") -> np.ndarray:
    """An object array of mpf rounded to a float dtype (overflow to ±inf, as the dtype would)."""
    a = np.asarray(array)
    with np.errstate(over="ignore"):
        return np.array([float(x) for x in a.ravel()], dtype=np.float64).reshape(a.shape).astype(dtype)


def _native(value, dtype: np.dtype) -> np.ndarray:
    """An int/bool result as a native array (object arrays of mpf are truncated toward zero, as astype)."""
    a = np.asarray(value)
    if a.dtype != object:
        return a.astype(dtype, copy=False)
    mpmath = _mpmath()
    if dtype.kind == "b":
        return np.array([bool(x) for x in a.ravel()], dtype=dtype).reshape(a.shape)
    ints = [int(x) if mpmath.isfinite(x) else 0 for x in a.ravel()]
    return np.array(ints, dtype=dtype).reshape(a.shape)


def normalize(value, var: Variable) -> np.ndarray:
    """`value` in the representation of `var`'s dtype: mpf objects for floats, native otherwise."""
    kind = var.dtype.kind
    if kind == "f":
        a = np.asarray(value)
        return a if a.dtype == object else to_mp(a)
    if kind == "c":
        raise StableGradError(f"the mpmath reference does not support complex dtypes ({var.type})")
    return _native(value, var.dtype)


# -- the evaluator -------------------------------------------------------------------------------------------
class Evaluator:
    """Evaluates graphs at `dps` decimal digits; remembers which ops it could only approximate."""

    def __init__(self, dps: int = 330):
        _register_once()
        self.dps = int(dps)
        self.approximated: set[str] = set()
        self._plans: dict[tuple, list[Apply]] = {}

    def __call__(
        self, inputs: Sequence[Variable], outputs: Sequence[Variable], values: Sequence[np.ndarray]
    ) -> list[np.ndarray]:
        """The outputs for these input values (float results as object arrays of mpf)."""
        mpmath = _mpmath()
        with mpmath.mp.workdps(self.dps):
            return self.run(inputs, outputs, values)

    def run(self, inputs: Sequence[Variable], outputs: Sequence[Variable], values: Sequence) -> list[np.ndarray]:
        """`__call__` for a caller already inside the working precision (composite bodies, loops)."""
        env: dict[int, Any] = {v.id: normalize(a, v) for v, a in zip(inputs, values)}
        key = (tuple(v.id for v in inputs), tuple(v.id for v in outputs))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = toposort(outputs, stop=inputs)
        for node in plan:
            args = [self._value(v, env) for v in node.inputs]
            result = self.apply(node.op, node, args)
            results = (result,) if len(node.outputs) == 1 else tuple(result)
            for out, r in zip(node.outputs, results):
                env[out.id] = normalize(r, out)
        return [self._value(v, env) for v in outputs]

    def _value(self, v: Variable, env: dict[int, Any]):
        if v.id in env:
            return env[v.id]
        if isinstance(v, Constant):
            env[v.id] = normalize(v.data, v)
            return env[v.id]
        raise StableGradError(f"mpmath evaluator: no value for input {v.name or v!r}")

    def apply(self, op: Op, node: Apply, args: list):
        impl = MPMATH_IMPLEMENTATIONS.get(type(op))
        if impl is not None:
            floats_in = any(is_floating(v.dtype) for v in node.inputs)
            if not floats_in and any(is_floating(v.dtype) for v in node.outputs):  # exp(int): exactly, not in float64
                args = [to_mp(a) for a in args]
            return impl(op, *args)
        if isinstance(op, Scan):
            return self._scan(op, args)
        if isinstance(op, SymbolicOp | OpFromGraph):
            placeholders, body = body_of(op, tuple(v.type for v in node.inputs))
            results = self.run(placeholders, body, args)
            return results[0] if len(results) == 1 else tuple(results)
        floats = [v for v in (*node.inputs, *node.outputs) if is_floating(v.dtype)]
        native = [a if not is_floating(v.dtype) else to_float(a) for a, v in zip(args, node.inputs)]
        if floats:
            self.approximated.add(op.name)
        with np.errstate(all="ignore"):
            return op.perform(*native)

    def _scan(self, op, args: list) -> tuple:
        n_carry, n_xs = op.n_carry, op.n_xs
        carry = list(args[:n_carry])
        xs = args[n_carry : n_carry + n_xs]
        consts = list(args[n_carry + n_xs :])
        steps = op.length if op.length is not None else (len(xs[0]) if xs else 0)
        inner = op.inner
        ys: list[list] = [[] for _ in range(op.n_ys)]
        history: list[list] = [[] for _ in range(n_carry)]
        order = range(steps - 1, -1, -1) if op.reverse else range(steps)
        for t in order:
            for h, c in zip(history, carry):
                h.append(c)
            outs = self.run(inner.inputs, inner.outputs, carry + [x[t] for x in xs] + consts)
            carry = list(outs[:n_carry])
            for y, o in zip(ys, outs[n_carry:]):
                y.append(o)
        if op.reverse:
            ys = [y[::-1] for y in ys]
            history = [h[::-1] for h in history]

        def stack(items, like: Variable):
            if items:
                return np.stack([np.asarray(i) for i in items])
            shape = (steps, *(n or 0 for n in like.type.shape))
            return to_mp(np.zeros(shape)) if is_floating(like.dtype) else np.zeros(shape, like.dtype)

        stacked_ys = [stack(y, o) for y, o in zip(ys, inner.outputs[n_carry:])]
        stacked_history = [stack(h, c) for h, c in zip(history, inner.carries)]
        return (*carry, *stacked_ys, *stacked_history)


def evaluate(
    inputs: Sequence[Variable], outputs: Sequence[Variable] | Variable, values: Sequence, dps: int = 330
) -> list[np.ndarray]:
    """`outputs` of the graph as written, at `dps` decimal digits, for these input values.

    >>> import numpy as np, stablegrad as sg
    >>> from stablegrad.audit.mpmath_eval import evaluate, to_float
    >>> x = sg.vector("x")
    >>> naive = sg.log(sg.sum(sg.exp(x)))
    >>> [value] = evaluate([x], [naive], [np.array([1000.0, 1000.0])], dps=30)
    >>> float(value)
    1000.6931471805599
    """
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    return Evaluator(dps)(list(inputs), outs, list(values))


# -- implementations ---------------------------------------------------------------------------------------
@functools.cache
def _register_once() -> None:
    """Fill the registry on first use; entries registered before keep precedence."""
    registered = dict(MPMATH_IMPLEMENTATIONS)
    _register()
    MPMATH_IMPLEMENTATIONS.update(registered)


def _register() -> None:
    # short names for the op modules, local to this table
    from ..ops import creation, indexing, linalg
    from ..ops import elementwise as ew
    from ..ops import math as m
    from ..ops import reduction as r
    from ..ops import shape as s

    elementwise_ops: list[tuple[type, str]] = [
        (ew.Add, "add"),
        (ew.Subtract, "subtract"),
        (ew.Multiply, "multiply"),
        (ew.Divide, "divide"),
        (m.Power, "power"),
        (ew.FloorDivide, "floor_divide"),
        (ew.Mod, "mod"),
        (ew.Maximum, "maximum"),
        (ew.Minimum, "minimum"),
        (ew.Negative, "negative"),
        (ew.Abs, "abs"),
        (ew.Square, "square"),
        (ew.Sqrt, "sqrt"),
        (ew.Reciprocal, "reciprocal"),
        (ew.Sign, "sign"),
        (ew.Floor, "floor"),
        (ew.Ceil, "ceil"),
        (ew.Clip, "clip"),
        (m.Exp, "exp"),
        (m.Exp2, "exp2"),
        (m.Expm1, "expm1"),
        (m.Log, "log"),
        (m.Log2, "log2"),
        (m.Log10, "log10"),
        (m.Log1p, "log1p"),
        (m.Sin, "sin"),
        (m.Cos, "cos"),
        (m.Tan, "tan"),
        (m.Tanh, "tanh"),
        (m.SechSquared, "sech_squared"),
        (m.Sinh, "sinh"),
        (m.Cosh, "cosh"),
        (m.Arctan, "arctan"),
        (m.Arcsinh, "arcsinh"),
        (m.Arccosh, "arccosh"),
        (m.Arctanh, "arctanh"),
        (m.Erf, "erf"),
        (m.Erfc, "erfc"),
        (m.Erfcx, "erfcx"),
        (m.Gammaln, "gammaln"),
        (m.Ndtr, "ndtr"),
        (m.Ndtri, "ndtri"),
        (m.Betaln, "betaln"),
        (m.DigammaDifference, "digamma_difference"),
        (m.Kv, "kv"),
        (m.Kve, "kve"),
        (m.Iv, "iv"),
        (m.Ive, "ive"),
    ]
    for cls, name in elementwise_ops:
        MPMATH_IMPLEMENTATIONS[cls] = _exact_or_native(cls, elementwise(name))

    MPMATH_IMPLEMENTATIONS[m.Polygamma] = lambda op, x: _objects(
        np.frompyfunc(scalar_ops()["polygamma"](op.n), 1, 1)(x)
    )
    MPMATH_IMPLEMENTATIONS[ew.Round] = lambda op, x: (
        _objects(np.frompyfunc(scalar_ops()["round"](op.decimals), 1, 1)(x)) if _is_mp(x) else op.perform(x)
    )
    MPMATH_IMPLEMENTATIONS[ew.Compare] = _compare
    MPMATH_IMPLEMENTATIONS[ew.Logical] = _logical
    MPMATH_IMPLEMENTATIONS[ew.Where] = lambda op, c, x, y: np.where(np.asarray(c, dtype=bool), x, y)
    MPMATH_IMPLEMENTATIONS[ew.Cast] = lambda op, x: x  # exact: a cast changes the representation, not the value
    MPMATH_IMPLEMENTATIONS[r.Sum] = lambda op, x: _reduce_sum(np.sum, op, x)
    MPMATH_IMPLEMENTATIONS[r.Prod] = lambda op, x: _reduce_sum(np.prod, op, x)
    MPMATH_IMPLEMENTATIONS[r.Max] = lambda op, x: _extremum("maximum", op, x, None)
    MPMATH_IMPLEMENTATIONS[r.Min] = lambda op, x: _extremum("minimum", op, x, None)
    MPMATH_IMPLEMENTATIONS[r.Any] = lambda op, x: op.perform(_truth(x))
    MPMATH_IMPLEMENTATIONS[r.All] = lambda op, x: op.perform(_truth(x))
    MPMATH_IMPLEMENTATIONS[r.ArgExtremum] = _arg_extremum
    MPMATH_IMPLEMENTATIONS[r.CumSum] = _exact_or_native(r.CumSum, _cumsum)
    # data movement: NumPy's own implementation works on object arrays unchanged
    data_movement: tuple[type, ...] = (
        s.ShapeDim,
        s.Reshape,
        s.Transpose,
        s.ExpandDims,
        s.Squeeze,
        s.BroadcastTo,
        s.ReduceTo,
        s.Concatenate,
        s.SplitLike,
        indexing.Index,
        indexing.IndexUpdate,
        linalg.Matmul,
        linalg.Einsum,
        creation.Alloc,
    )
    for cls in data_movement:
        MPMATH_IMPLEMENTATIONS[cls] = lambda op, *xs: op.perform(*xs)
    _register_stable()
    _register_decompositions()


def _register_stable() -> None:
    """The stable family's few primitive (non-composite) ops."""
    MPMATH_IMPLEMENTATIONS[_common.MaxShift] = lambda op, x: _extremum("maximum", op, x, scalar_ops()["mpf"]("-inf"))
    MPMATH_IMPLEMENTATIONS[LogCumSumExp] = _logcumsumexp


def _register_decompositions() -> None:
    """Dense linear algebra (ops.decompositions) by mpmath's own matrix routines, matrix by matrix."""
    from ..ops import decompositions as d

    table: list[tuple[type, Callable]] = [
        (d.Cholesky, _mp_cholesky),
        (d.SolveTriangular, _mp_solve_triangular),
        (d.Solve, _mp_solve),
        (d.Inv, lambda op, a: _over_matrices(lambda m: m**-1, a)),
        (d.Det, lambda op, a: _over_matrices(_mpmath().det, a, scalar=True)),
        (d.Slogdet, _mp_slogdet),
    ]
    for cls, impl in table:
        MPMATH_IMPLEMENTATIONS[cls] = _exact_or_native(cls, impl)


def _over_matrices(fn: Callable, a: np.ndarray, scalar: bool = False) -> np.ndarray:
    """fn(mpmath.matrix) for each matrix of the stack `a` (object arrays in and out)."""
    mpmath = _mpmath()
    a = to_mp(a)
    out = np.empty(a.shape[:-2] if scalar else a.shape, dtype=object)
    for index in np.ndindex(*a.shape[:-2]):
        result = fn(mpmath.matrix(a[index].tolist())) if a.shape[-1] else (mpmath.mpf(1) if scalar else None)
        if result is not None:
            out[index] = result if scalar else np.array(result.tolist(), dtype=object).reshape(a.shape[-2:])
    return out


def _mp_cholesky(op, a):
    a = to_mp(a)
    lower = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)  # the symmetric matrix NumPy's factor sees
    mpmath = _mpmath()

    def factor(m):
        try:
            return mpmath.cholesky(m)
        except ValueError:  # not positive definite
            if op.on_error == "raise":
                raise
            n = m.rows
            return mpmath.matrix([[mpmath.nan if j <= i else 0 for j in range(n)] for i in range(n)])

    return _over_matrices(factor, lower)


def _mp_solve_with(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x = a⁻¹ b over broadcast batch axes; b a vector (1-D) or a stack of matrices."""
    mpmath = _mpmath()
    a, b = to_mp(a), to_mp(b)
    vector = b.ndim == 1
    bm = b[:, None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    a, bm = np.broadcast_to(a, (*batch, *a.shape[-2:])), np.broadcast_to(bm, (*batch, *bm.shape[-2:]))
    out = np.empty(bm.shape, dtype=object)
    for index in np.ndindex(*batch):
        if a.shape[-1] and bm.shape[-1]:  # (at working precision, the inverse is as good as a solve)
            x = mpmath.matrix(a[index].tolist()) ** -1 * mpmath.matrix(bm[index].tolist())
            out[index] = np.array(x.tolist(), dtype=object).reshape(bm.shape[-2:])
    return out[..., 0] if vector else out


def _mp_solve(op, a, b):
    return _mp_solve_with(a, b)


def _mp_solve_triangular(op, a, b):
    a = to_mp(a)
    n = a.shape[-1]
    t = np.tril(a) if op.lower else np.triu(a)
    if op.unit_diagonal:
        eye = np.eye(n, dtype=bool)
        t = np.where(eye, scalar_ops()["mpf"](1), t)
    return _mp_solve_with(np.swapaxes(t, -1, -2) if op.trans else t, b)


def _mp_slogdet(op, a):
    mpmath = _mpmath()
    det = _over_matrices(mpmath.det, a, scalar=True)
    sign = np.frompyfunc(lambda v: mpmath.mpf((v > 0) - (v < 0)), 1, 1)(det)
    logabsdet = np.frompyfunc(lambda v: mpmath.log(abs(v)) if v != 0 else mpmath.mpf("-inf"), 1, 1)(det)
    return _objects(sign), _objects(logabsdet)


def _cumsum(op, x):
    return np.add.accumulate(x, axis=op.axis, dtype=object) if x.shape[op.axis] else x


def _logcumsumexp(op, x):
    if x.shape[op.axis] == 0:
        return x
    return np.frompyfunc(scalar_ops()["logaddexp"], 2, 1).accumulate(x, axis=op.axis, dtype=object)


def _is_mp(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def _exact_or_native(cls: type, impl: Callable) -> Callable:
    """impl on mpf operands; integer-only operands keep NumPy's (exact, integer) semantics."""

    def apply(op, *xs):
        if not any(_is_mp(x) for x in xs):
            with np.errstate(all="ignore"):
                return op.perform(*xs)
        return impl(op, *xs)

    return apply


def _compare(op, x, y):
    if not (_is_mp(x) or _is_mp(y)):
        return op.perform(x, y)
    return np.asarray(getattr(np, op.ufunc)(x, y), dtype=bool)


def _logical(op, *xs):
    if op.ufunc in ("isnan", "isinf", "isfinite"):
        (x,) = xs
        if not _is_mp(x):
            return op.perform(x)
        return np.asarray(_objects(np.frompyfunc(scalar_ops()[op.ufunc], 1, 1)(x)), dtype=bool)
    return op.perform(*(_truth(x) for x in xs))


def _truth(x):
    return np.asarray(np.not_equal(x, 0), dtype=bool) if _is_mp(x) else x


def _reduce_sum(fn, op, x):
    if not _is_mp(x):
        return op.perform(x)
    return to_mp(fn(x, axis=op.axes, keepdims=op.keepdims))


def _extremum(name: str, op, x, initial):
    if not _is_mp(x):
        return op.perform(x)
    reduce = np.frompyfunc(scalar_ops()[name], 2, 1).reduce
    out = x
    for axis in sorted(op.axes, reverse=True):
        if out.shape[axis] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {op.name} which has no identity")
            shape = out.shape[:axis] + out.shape[axis + 1 :]
            out = np.full(shape, initial, dtype=object)
        else:
            out = _objects(reduce(out, axis=axis, dtype=object))
    if op.keepdims:
        out = np.expand_dims(out, op.axes) if op.axes else out
    return out


def _arg_extremum(op, x):
    if not _is_mp(x):
        return op.perform(x)
    nan = np.asarray(_objects(np.frompyfunc(scalar_ops()["isnan"], 1, 1)(x)), dtype=bool)
    as_float = np.where(nan, np.nan, to_float(np.where(nan, 0, x)))  # ordering survives rounding but for ties
    return op.perform(as_float)
