"""One `lower_<op>(op, *args)` per primitive op: the op's NumPy semantics written with `jax.numpy`.

Arguments are traced JAX arrays or, for values known while tracing (constants,
shapes and integers computed from shapes), NumPy arrays.  Two habits keep the
results identical to the NumPy backend:

- Operands are converted to the dtype NumPy computes in *before* the JAX call,
  because JAX's promotion differs from NumPy's (int32 + float32 is float32 in
  JAX, float64 in NumPy; sqrt of int8 is float16 in NumPy).
- Anything that fixes a shape (reshape targets, broadcast targets, arange ends,
  boolean masks) must be a NumPy value at trace time: XLA compiles static shapes.
  `static_ints` says so clearly when it is not.

Matrix products ask for `Precision.HIGHEST`, so float32 products on GPUs are not
silently done in TF32 (10-bit mantissas), which would break parity with NumPy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

from ...errors import ExecutionError, ShapeError, StableGradError
from ...graph.types import is_floating
from ...ops import complex_parts, creation, decompositions, elementwise, indexing, linalg, reduction, shape
from ...ops import math as math_ops
from ...ops.base import _numpy_result_dtype
from ...ops.monomial import ARITHMETIC, SCALED, Monomial, evaluate, explained, out_of_range
from ...ops.stable._common import MaxShift
from ...ops.stable.logsumexp import LogCumSumExp
from ...ops.stable.softmax import LabelsInRange
from .flags import check, settle

HIGHEST = jax.lax.Precision.HIGHEST


class LoweringError(Exception):
    """What a lowering reports; `trace.evaluate` raises it as `kind` with the node's source line.

    (Raised directly, a StableGradError would name a frame inside JAX's tracer.)
    """

    def __init__(self, kind: type[StableGradError], message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def is_static(value) -> bool:
    """Whether a value is known while tracing (a NumPy array or scalar, not a tracer)."""
    return isinstance(value, np.ndarray | np.generic)


def static_ints(values: Sequence, op: str, what: str = "shape") -> tuple[int, ...]:
    """Shape entries as Python ints; an entry computed from array *values* cannot be compiled."""
    result = []
    for i, v in enumerate(values):
        if not is_static(v):
            raise LoweringError(
                ShapeError,
                f"{op}: on the jax backend the {what} must be known when compiling, but entry {i} is computed "
                "from array values rather than from shapes (XLA compiles static shapes)",
            )
        result.append(int(v))
    return tuple(result)


def _cast(values: Sequence, dtype: np.dtype) -> list:
    return [v if v.dtype == dtype else jnp.asarray(v, dtype=dtype) for v in values]


# -- elementwise: NumPy's promotion first, then the JAX function of the same meaning --------------------
def _sech_squared(x):
    """sech²(x) as `SechSquared.perform` computes it: 4e / (1 + e)², e = exp(-2|x|) (no cancellation)."""
    e = jnp.exp(-2 * jnp.abs(x))
    return 4 * e / jnp.square(1 + e)


UFUNCS: dict[type, Callable] = {
    elementwise.Add: jnp.add,
    elementwise.Subtract: jnp.subtract,
    elementwise.Multiply: jnp.multiply,
    elementwise.Divide: jnp.true_divide,
    math_ops.Power: jnp.power,
    elementwise.FloorDivide: jnp.floor_divide,
    elementwise.Mod: jnp.remainder,
    elementwise.Maximum: jnp.maximum,
    elementwise.Minimum: jnp.minimum,
    elementwise.Negative: jnp.negative,
    elementwise.Abs: jnp.abs,
    elementwise.Square: jnp.square,
    elementwise.Sqrt: jnp.sqrt,
    elementwise.Reciprocal: jnp.reciprocal,
    elementwise.Sign: jnp.sign,
    elementwise.Floor: jnp.floor,
    elementwise.Ceil: jnp.ceil,
    elementwise.Clip: jnp.clip,
    math_ops.Exp: jnp.exp,
    math_ops.Exp2: jnp.exp2,
    math_ops.Expm1: jnp.expm1,
    math_ops.Log: jnp.log,
    math_ops.Log2: jnp.log2,
    math_ops.Log10: jnp.log10,
    math_ops.Log1p: jnp.log1p,
    math_ops.Sin: jnp.sin,
    math_ops.Cos: jnp.cos,
    math_ops.Tan: jnp.tan,
    math_ops.Tanh: jnp.tanh,
    math_ops.SechSquared: _sech_squared,
    math_ops.Sinh: jnp.sinh,
    math_ops.Cosh: jnp.cosh,
    math_ops.Arctan: jnp.arctan,
    math_ops.Arcsinh: jnp.arcsinh,
    math_ops.Arccosh: jnp.arccosh,
    math_ops.Arctanh: jnp.arctanh,
    complex_parts.Real: jnp.real,
    complex_parts.Imag: jnp.imag,
    complex_parts.Conj: jnp.conjugate,
    complex_parts.Angle: jnp.angle,
}

#: SciPy's special functions evaluate float16/float32 arguments in double precision and round
#: the result; JAX's float32 versions do not (gammaln(1) is 4.8e-7, not 0), so these do as SciPy
SCIPY_UFUNCS: dict[type, Callable] = {
    math_ops.Erf: jsp.erf,
    math_ops.Erfc: jsp.erfc,
    math_ops.Erfcx: jsp.erfcx,
    math_ops.Gammaln: jsp.gammaln,
    math_ops.Ndtri: jsp.ndtri,  # (added with the dense linear algebra block below: betaln and ndtr are there)
}

_FLOAT64 = np.dtype(np.float64)


def lower_ufunc(op, *args):
    """Ops in `UFUNCS`: every operand in the output dtype (NumPy computes there), then the JAX function."""
    result = lower_ufunc_unguarded(op, *args)
    if isinstance(op, ROUNDED) and is_floating(result.dtype) and not is_static(result):
        return rounded(result)
    return result


def lower_ufunc_unguarded(op, *args):
    """`lower_ufunc` without `rounded`: for a product or quotient that no node of the
    program reads, only its caller (`trace.Plan` picks it), so nothing can add to it."""
    dtype = _numpy_result_dtype(op, tuple(np.dtype(a.dtype) for a in args))
    if dtype.kind != "c" and any(np.dtype(a.dtype).kind == "c" for a in args):
        # |z|, Re z, Im z, arg z: complex in, real out (casting z first would drop its imaginary part)
        return UFUNCS[type(op)](*args).astype(dtype)
    return UFUNCS[type(op)](*_cast(args, dtype))


#: products and quotients are rounded where they are computed (see `rounded`)
ROUNDED = (elementwise.Multiply, elementwise.Divide)


#: whether `rounded` guards products (off while `stabilize` traces: see `xla_rounding`)
_GUARDED: ContextVar[bool] = ContextVar("guarded", default=True)


def rounded(x):
    """x, rounded to its dtype before any reader adds to it.

    XLA's CPU and GPU code generators contract a product that feeds an addition
    into one fused multiply-add, which skips the product's rounding.  Where the
    same product is also used rounded — `w·p₁ - w·p₂` with p₁ = p₂, or
    `u - Σ u·p` with p one-hot — the difference is then the rounding error
    (1e-17) instead of the exact 0 that NumPy gives and the edge table promises.
    A select on a comparison XLA cannot fold hides the product from the
    contraction; it costs a compare and a select in a fused loop, and more where
    the select keeps XLA's CPU library fusions (YNNPACK, which never contracts)
    from taking the loop in: 30% of a softmax regression's value and gradient.
    """
    return jnp.where(x == x, x, jnp.nan) if _GUARDED.get() else x


@contextmanager
def xla_rounding() -> Iterator[None]:
    """Within: products are left to XLA's rounding, as in the user's own JAX code (`rounded` is x).

    `stabilize` traces under it: its result is a JAX function that runs inside the
    user's `jax.jit`, next to code XLA contracts anyway, and is held to the speed of
    the same model stabilised by hand, which XLA rounds the same way."""
    token = _GUARDED.set(False)
    try:
        yield
    finally:
        _GUARDED.reset(token)


def _in_double(fn: Callable, x, dtype: np.dtype):
    """fn evaluated as SciPy does: in float64 for narrower floats, rounded back to `dtype`."""
    if is_floating(dtype) and dtype.itemsize < 8:
        return fn(jnp.asarray(x, dtype=_FLOAT64)).astype(dtype)
    return fn(jnp.asarray(x, dtype=dtype))


def lower_scipy_ufunc(op, x):
    """Ops in `SCIPY_UFUNCS`, with SciPy's precision."""
    return _in_double(SCIPY_UFUNCS[type(op)], x, _numpy_result_dtype(op, (np.dtype(x.dtype),)))


def lower_round(op, x):
    return jnp.round(x, op.decimals)


def lower_polygamma(op, x):
    def fn(v):
        return jsp.digamma(v) if op.n == 0 else jsp.polygamma(op.n, v)

    return _in_double(fn, x, _numpy_result_dtype(op, (np.dtype(x.dtype),)))


def lower_compare(op, x, y):
    """x <op> y in their common NumPy dtype (JAX would compare int32 with float32 in float32)."""
    return getattr(jnp, op.ufunc)(*_cast([x, y], np.result_type(x.dtype, y.dtype)))


def lower_logical(op, *xs):
    return getattr(jnp, op.ufunc)(*xs)


def lower_where(op, c, x, y):
    dtype = _numpy_result_dtype(op, (np.dtype(c.dtype), np.dtype(x.dtype), np.dtype(y.dtype)))
    return jnp.where(c, *_cast([x, y], dtype))


def lower_monomial(op, *xs):
    """The tree as written; where that is not a normal number its factors explain, the tree again
    with exponents carried apart (`ops.monomial`): speculated (`settle`), as such entries are rare."""
    dtype = _numpy_result_dtype(op, tuple(np.dtype(x.dtype) for x in xs))
    xs = tuple(_cast([jnp.asarray(x) for x in xs], dtype))
    written = evaluate(op.tree, xs, ARITHMETIC)
    off = out_of_range(written, jnp) & ~explained(written, xs, jnp)

    def exact():
        pairs = [jnp.frexp(x) for x in xs]
        significand, exponent = evaluate(op.tree, pairs, SCALED)
        return jnp.where(off, jnp.ldexp(significand, exponent), written)

    return rounded(settle(written, off, exact))


def lower_cast(op, x):
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x) and op.dtype.kind != "c":  # the real part, as `Cast.perform` (without the warning)
        x = jnp.real(x)
    return x.astype(op.dtype)


# -- reductions -------------------------------------------------------------------------------------------
@functools.cache
def _reduction_dtype(op, dtype: np.dtype, ndim: int) -> np.dtype:
    return np.asarray(op.perform(np.ones((1,) * ndim, dtype))).dtype


def _reduce(fn: Callable, op, x, accumulate: bool = False):
    if accumulate:  # sum and prod accumulate in NumPy's result dtype (int32 sums in int64)
        (x,) = _cast([x], _reduction_dtype(op, np.dtype(x.dtype), x.ndim))
    return fn(x, axis=op.axes, keepdims=op.keepdims)


def _require_nonempty(op, x) -> None:
    if any(x.shape[a] == 0 for a in op.axes):
        raise LoweringError(
            ExecutionError, f"{op.name}: zero-size array to a reduction that has no identity (shape {x.shape})"
        )


def lower_sum(op, x):
    return _reduce(jnp.sum, op, x, accumulate=True)


def lower_prod(op, x):
    return _reduce(jnp.prod, op, x, accumulate=True)


def lower_max(op, x):
    _require_nonempty(op, x)
    return _reduce(jnp.max, op, x)


def lower_min(op, x):
    _require_nonempty(op, x)
    return _reduce(jnp.min, op, x)


def lower_any(op, x):
    return _reduce(jnp.any, op, x)


def lower_all(op, x):
    return _reduce(jnp.all, op, x)


def lower_arg_extremum(op, x):
    fn = jnp.argmax if op.kind == "argmax" else jnp.argmin
    along = len(op.axes) == 1 and x.ndim > 0
    # empty only if the axis searched is: argmax(zeros((1, 0)), axis=0) is an empty result, as NumPy's
    if (x.shape[op.axes[0]] if along else math.prod(x.shape)) == 0:
        raise LoweringError(
            ExecutionError, f"{op.name}: attempt to get {op.kind} of an empty sequence (shape {x.shape})"
        )
    if along:
        return fn(x, axis=op.axes[0], keepdims=op.keepdims)
    out = fn(jnp.ravel(x))
    return jnp.reshape(out, (1,) * x.ndim) if op.keepdims else out


# -- shapes ------------------------------------------------------------------------------------------------
def lower_shape_dim(op, x):
    """A static extent: the traced array's shape is known (jit retraces for every new input shape)."""
    return np.int64(np.shape(x)[op.axis])


def lower_reshape(op, x, *dims):
    return jnp.reshape(x, static_ints(dims, "reshape"))


def lower_transpose(op, x):
    return jnp.transpose(x, op.axes)


def lower_expand_dims(op, x):
    return jnp.expand_dims(x, op.axes)


def lower_squeeze(op, x):
    return jnp.squeeze(x, op.axes)


def lower_broadcast_to(op, x, *dims):
    return jnp.broadcast_to(x, static_ints(dims, "broadcast_to"))


def lower_reduce_to(op, g, *dims):
    target = static_ints(dims, "reduce_to")
    if tuple(np.shape(g)) == target:
        return g
    return jnp.reshape(jnp.sum(g, axis=shape.reduced_axes(tuple(g.shape), target), keepdims=True), target)


def lower_concatenate(op, *xs):
    return jnp.concatenate(xs, axis=op.axis)


def lower_split_like(op, g, *refs):
    cuts = np.cumsum([np.shape(r)[op.axis] for r in refs])[:-1]
    return tuple(jnp.split(g, [int(c) for c in cuts], axis=op.axis))


# -- indexing ---------------------------------------------------------------------------------------------
def _index(spec: tuple, arrays: Sequence, op: str) -> tuple:
    """The index tuple; a boolean mask becomes its (static) nonzero positions, as NumPy defines it."""
    it = iter(arrays)
    index: list[Any] = []
    for entry in spec:
        if entry == indexing.ARRAY:
            array = next(it)
            if array.dtype == np.bool_:
                if not is_static(array):
                    raise LoweringError(
                        ShapeError,
                        f"{op}: on the jax backend a boolean mask must be known when compiling; a mask computed "
                        "from array values gives a data-dependent shape, which XLA cannot compile "
                        "(use sg.where(mask, x, 0) instead)",
                    )
                index.extend(np.nonzero(array))
            else:
                index.append(array)
        elif isinstance(entry, tuple):
            index.append(slice(*entry))
        else:
            index.append(entry)
    return tuple(index)


def _check_in_bounds(name: str, spec: tuple, arrays: Sequence, shape: tuple[int, ...]) -> None:
    """Indices in [-n, n) for their axis, as NumPy (and so the NumPy backend) requires: XLA would
    clamp a gather and drop a scatter.  Static ints are checked now, index arrays at run time."""
    it = iter(arrays)
    axis = 0
    for entry in spec:
        if entry is None:  # a new axis
            continue
        if entry == indexing.ARRAY:
            array = next(it)
            if array.dtype == np.bool_:
                axis += array.ndim
                continue
            n = shape[axis]
            if math.prod(array.shape):
                bad = jnp.ravel((array < -n) | (array >= n))
                message = f"{name}: index {{}} is out of bounds for axis {axis} with size {n}"
                check(jnp.any(bad), jnp.ravel(array)[jnp.argmax(bad)], message)
        elif isinstance(entry, int) and not -shape[axis] <= entry < shape[axis]:
            raise LoweringError(
                ExecutionError, f"{name}: index {entry} is out of bounds for axis {axis} with size {shape[axis]}"
            )
        axis += 1


def lower_index(op, x, *arrays):
    _check_in_bounds(op.name, op.spec, arrays, x.shape)
    return jnp.asarray(x)[_index(op.spec, arrays, "getitem")]


def lower_index_update(op, x, v, *arrays):
    _check_in_bounds(op.name, op.spec, arrays, x.shape)
    at = jnp.asarray(x).at[_index(op.spec, arrays, f"at[].{op.mode}")]
    return at.set(v) if op.mode == "set" else at.add(v)


# -- products ---------------------------------------------------------------------------------------------
def lower_matmul(op, a, b):
    return jnp.matmul(*_cast([a, b], np.result_type(a.dtype, b.dtype)), precision=HIGHEST)


def lower_einsum(op, *xs):
    return jnp.einsum(op.subscripts, *_cast(xs, np.result_type(*(x.dtype for x in xs))), precision=HIGHEST)


# -- dense linear algebra (ops.decompositions) and betaln: one block, kept together -----------------------
def _as_batched_columns(a, b, vector: bool) -> tuple:
    """a and b (a 1-D b as one column) broadcast to the same batch axes: lax's solvers do not broadcast."""
    bm = b[:, None] if vector else b
    batch = tuple(np.broadcast_shapes(a.shape[:-2], bm.shape[:-2]))
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(bm, batch + bm.shape[-2:])


def lower_cholesky(op, a):
    """The lower factor from the lower triangle only, as NumPy (jnp.linalg.cholesky would symmetrize A)."""
    return jax.lax.linalg.cholesky(jnp.asarray(a), symmetrize_input=False)


def lower_solve_triangular(op, a, b):
    vector = b.ndim == 1
    am, bm = _as_batched_columns(a, b, vector)
    x = jax.lax.linalg.triangular_solve(
        am, bm, left_side=True, lower=op.lower, transpose_a=bool(op.trans), unit_diagonal=op.unit_diagonal
    )
    return x[..., 0] if vector else x


def lower_solve(op, a, b):
    vector = b.ndim == 1
    x = jnp.linalg.solve(*_as_batched_columns(a, b, vector))
    return x[..., 0] if vector else x


def lower_inv(op, a):
    return jnp.linalg.inv(a)


def lower_det(op, a):
    return jnp.linalg.det(a)


def lower_slogdet(op, a):
    """From the LU factorization for every size, as NumPy's: jnp.linalg.slogdet takes a closed form
    for 1×1 and 2×2 (JAX 0.10), whose ad - bc overflows (inf, sign -1 at entries of 1e200) where the
    pivots do not.  The gradient is the graph's own (Slogdet's pullback), so only values are needed."""
    lu, pivots, _ = jax.lax.linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    swaps = jnp.count_nonzero(pivots != jnp.arange(a.shape[-1], dtype=pivots.dtype), axis=-1)
    flips = swaps + jnp.count_nonzero(diag < 0, axis=-1)
    sign = jnp.where(jnp.any(diag == 0, axis=-1), 0, 1 - 2 * (flips % 2)).astype(a.dtype)
    return sign, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)


def lower_betaln(op, a, b):
    """betaln as `ops.math._betaln` computes it (jax.scipy.special.betaln is off by 4e-7 at (10, 0.5)).

    Narrower floats compute in float64.  Where the larger argument is at least 20,
    log Γ(large) - log Γ(large + small) comes from Stirling's series, so the two huge
    log-gammas never cancel; elsewhere the three log-gammas, which are small there.
    """
    dtype = _numpy_result_dtype(op, (np.dtype(a.dtype), np.dtype(b.dtype)))
    compute = _FLOAT64 if not is_floating(dtype) or dtype.itemsize < 8 else dtype
    a, b = _cast([a, b], compute)
    small, large = jnp.minimum(a, b), jnp.maximum(a, b)
    # (an infinite argument stays with the three log-gammas: SciPy's -inf)
    far = (large >= math_ops._BETALN_STIRLING_FROM) & (small > 0) & jnp.isfinite(large)
    big = jnp.where(far, large, math_ops._BETALN_STIRLING_FROM)  # each branch sees its own arguments
    little = jnp.where(far, small, 1.0)
    stirling = math_ops.betaln_stirling(jnp, jsp.gammaln, big, little)
    direct = jsp.gammaln(a) + jsp.gammaln(b) - jsp.gammaln(a + b)
    return jnp.where(far, stirling, direct).astype(dtype)


def lower_digamma_difference(op, a, b):
    """ψ(a) - ψ(a + b) as `DigammaDifference.perform` computes it (`ops.math.digamma_difference`), in float64."""
    dtype = _numpy_result_dtype(op, (np.dtype(a.dtype), np.dtype(b.dtype)))
    a, b = _cast([a, b], _FLOAT64)
    return math_ops.digamma_difference(jnp, jsp.digamma, a, b).astype(dtype)


def lower_ndtr(op, x):
    """Φ as `Ndtr.perform`: below -1, erfcx(-x/√2)·exp(-x²/2)/2 with x² split exactly (hi on a 2⁻²⁰ grid)."""
    dtype = _numpy_result_dtype(op, (np.dtype(x.dtype),))
    x = jnp.asarray(x, dtype=_FLOAT64)
    tail = math_ops.ndtr_tail(jnp, jsp.erfcx, jnp.clip(x, -40.0, -1.0))  # the tail sees only its own arguments
    return jnp.where(x < -1.0, tail, jsp.ndtr(x)).astype(dtype)


# -- creation ---------------------------------------------------------------------------------------------
def lower_alloc(op, value, *dims):
    return jnp.broadcast_to(jnp.asarray(value), static_ints(dims, "full"))


def lower_arange(op, start, stop, step):
    ends = [v.item() for v in (start, stop, step)] if all(map(is_static, (start, stop, step))) else None
    if ends is None:
        raise LoweringError(ShapeError, "arange: on the jax backend start, stop and step must be known when compiling")
    if op.dtype.kind in "iu" and all(isinstance(e, int) for e in ends):
        return jnp.arange(*ends, dtype=op.dtype)  # an iota, not a stored constant
    return jnp.asarray(np.arange(*ends, dtype=op.dtype))


# -- the stable family's primitives ---------------------------------------------------------------------------
def lower_max_shift(op, x):
    return jnp.max(x, axis=op.axes, keepdims=op.keepdims, initial=-np.inf)


def lower_log_cum_sum_exp(op, x):
    """`lax.cumlogsumexp`: a parallel prefix of stable pairwise logaddexps (NumPy runs them in sequence)."""
    return jax.lax.cumlogsumexp(x, axis=op.axis)


def lower_labels_in_range(op, labels, n):
    """The labels, after a run-time check (`flags.check`) that they lie in [0, n)."""
    if math.prod(labels.shape) == 0:
        return labels
    bad = jnp.ravel((labels < 0) | (labels >= n))
    first_bad = jnp.ravel(labels)[jnp.argmax(bad)]
    limit = int(n) if is_static(n) else "n"
    check(jnp.any(bad), first_bad, f"{op.name}: labels must lie in [0, {limit}) (the number of classes), got {{}}")
    return labels


# -- modified Bessel functions of real order (ops.math Kv, Kve, Iv, Ive) ----------------------------------------
def lower_bessel(op, v, x):
    """SciPy's function through a host callback: JAX has Bessel functions of order 0 and 1 only.
    (The callback runs on the CPU; under `vmap` it is called once on the broadcast batch.)"""
    dtype = _numpy_result_dtype(op, (np.dtype(v.dtype), np.dtype(x.dtype)))
    result = jax.ShapeDtypeStruct(jnp.broadcast_shapes(jnp.shape(v), jnp.shape(x)), dtype)
    return jax.pure_callback(
        lambda a, b: np.asarray(op.perform(a, b), dtype), result, v, x, vmap_method="broadcast_all"
    )


# -- running sums and products, sorting (issue 19: cumsum, cumprod, argsort) -------------------------------
def lower_cumulative(op, x):
    """cumsum/cumprod, accumulated in NumPy's dtype (int32 and bool in int64), as `lower_sum`."""
    (x,) = _cast([jnp.asarray(x)], _reduction_dtype(op, np.dtype(x.dtype), x.ndim))
    fn = jnp.cumsum if isinstance(op, reduction.CumSum) else jnp.cumprod
    return fn(x, axis=op.axis)


def lower_argsort(op, x):
    """A stable argsort, as the op's `perform` (NaNs last, as NumPy's)."""
    return jnp.argsort(x, axis=op.axis, stable=True).astype(np.int64)


LOWERINGS: dict[type, Callable] = {
    **dict.fromkeys(UFUNCS, lower_ufunc),
    **dict.fromkeys(SCIPY_UFUNCS, lower_scipy_ufunc),
    elementwise.Round: lower_round,
    elementwise.Compare: lower_compare,
    elementwise.Logical: lower_logical,
    elementwise.Where: lower_where,
    elementwise.Cast: lower_cast,
    Monomial: lower_monomial,
    math_ops.Polygamma: lower_polygamma,
    reduction.Sum: lower_sum,
    reduction.Prod: lower_prod,
    reduction.Max: lower_max,
    reduction.Min: lower_min,
    reduction.Any: lower_any,
    reduction.All: lower_all,
    reduction.ArgExtremum: lower_arg_extremum,
    shape.ShapeDim: lower_shape_dim,
    shape.Reshape: lower_reshape,
    shape.Transpose: lower_transpose,
    shape.ExpandDims: lower_expand_dims,
    shape.Squeeze: lower_squeeze,
    shape.BroadcastTo: lower_broadcast_to,
    shape.ReduceTo: lower_reduce_to,
    shape.Concatenate: lower_concatenate,
    shape.SplitLike: lower_split_like,
    indexing.Index: lower_index,
    indexing.IndexUpdate: lower_index_update,
    linalg.Matmul: lower_matmul,
    linalg.Einsum: lower_einsum,
    # dense linear algebra (ops.decompositions) and betaln
    decompositions.Cholesky: lower_cholesky,
    decompositions.SolveTriangular: lower_solve_triangular,
    decompositions.Solve: lower_solve,
    decompositions.Inv: lower_inv,
    decompositions.Det: lower_det,
    decompositions.Slogdet: lower_slogdet,
    math_ops.Betaln: lower_betaln,
    math_ops.DigammaDifference: lower_digamma_difference,
    math_ops.Ndtr: lower_ndtr,
    creation.Alloc: lower_alloc,
    creation.Arange: lower_arange,
    MaxShift: lower_max_shift,
    LogCumSumExp: lower_log_cum_sum_exp,
    LabelsInRange: lower_labels_in_range,
    # issue 19: running sums and products, sorting
    reduction.CumSum: lower_cumulative,
    reduction.CumProd: lower_cumulative,
    indexing.Argsort: lower_argsort,
    **dict.fromkeys((math_ops.Kv, math_ops.Kve, math_ops.Iv, math_ops.Ive), lower_bessel),
}
