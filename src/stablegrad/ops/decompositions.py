"""Dense linear algebra: Cholesky, triangular and general solves, inverse, determinants.

Each op runs NumPy/SciPy in `perform` and batches over leading axes as NumPy does.  Every
pullback is written with these same ops (solves, products, masks), so gradients of
gradients work.  No pullback forms an inverse where a solve will do: `solve(Aᵀ, Ḡ)` is
backward stable, `inv(A)ᵀ @ Ḡ` loses another factor of the condition number.

Integer operands compute in float64, float32 stays float32; float16, bfloat16 and complex
are refused (NumPy's linalg refuses float16; the pullbacks are written for real matrices).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np
import scipy.linalg as sla

from ..errors import DTypeError, ShapeError
from ..graph.basic import READS_OUTPUTS, Op, Reads, Variable, Zero
from ..graph.types import TensorType, broadcast_shapes, is_bfloat16, is_floating
from .base import as_operands, astype
from .creation import arange
from .elementwise import equal, greater, greater_equal, where
from .linalg import matmul
from .shape import expand_dims, reduce_to, shape_tuple, squeeze, swapaxes

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}  # real matrices: conjugate-transpose is transpose


# -- shared: operand checks, the dtype rule, and the masks the pullbacks need ----------------------------
def _operands(op: str, *args) -> list[Variable]:
    """The operands in their common compute dtype: float32 or float64 (ints, bools → float64)."""
    xs = as_operands(*args)
    dtype = np.result_type(*(x.dtype for x in xs))
    if dtype.kind == "c":
        raise DTypeError(f"{op}: complex matrices are not supported, got {dtype.name}")
    if dtype == np.float16 or is_bfloat16(dtype):  # as NumPy: "array type float16 is unsupported in linalg"
        raise DTypeError(f"{op}: {dtype.name} is not supported (as in NumPy's linalg); cast to float32 first")
    if dtype.kind not in "biuf":
        raise DTypeError(f"{op}: operands must be numeric, got {dtype.name}")
    compute = dtype if is_floating(dtype) else np.dtype(np.float64)
    return [astype(x, compute) for x in xs]


def _square(op: str, a: Variable, what: str = "a") -> tuple:
    """a's batch shape, after checking a is a (stack of) square matrices."""
    shape = a.type.shape
    if a.ndim < 2:
        raise ShapeError(f"{op}: {what} must be a square matrix or a stack of them (..., n, n), got shape {shape}")
    m, n = shape[-2:]
    if m is not None and n is not None and m != n:
        raise ShapeError(f"{op}: {what} must be square (..., n, n), got shape {shape} ({m} rows, {n} columns)")
    return shape[:-2]


def _float_type(op: str, *xs: Variable) -> np.dtype:
    dtype = np.result_type(*(x.dtype for x in xs))
    if dtype not in (np.float32, np.float64):
        raise DTypeError(f"{op}: expects float32 or float64 operands, got {', '.join(x.dtype.name for x in xs)}")
    return dtype


def _solve_shape(op: str, a: Variable, b: Variable) -> tuple:
    """The result shape of solving a x = b: b a vector (n,) or a stack of matrices (..., n, k)."""
    batch = _square(op, a)
    n = a.type.shape[-1] if a.type.shape[-1] is not None else a.type.shape[-2]
    if b.ndim == 0:
        raise ShapeError(f"{op}: b must be a vector (n,) or a stack of matrices (..., n, k), got a scalar")
    rows = b.type.shape[0] if b.ndim == 1 else b.type.shape[-2]
    if n is not None and rows is not None and n != rows:
        raise ShapeError(
            f"{op}: a is {n}×{n} but b has {rows} rows (shapes {a.type.shape} and {b.type.shape}; "
            "b is a vector only when it is 1-D, as in NumPy 2)"
        )
    if b.ndim == 1:
        return (*batch, n if n is not None else rows)
    return (*broadcast_shapes(batch, b.type.shape[:-2], op=op), n if n is not None else rows, b.type.shape[-1])


def _mt(x: Variable) -> Variable:
    """The matrix transpose of the last two axes."""
    return swapaxes(x, -1, -2)


def _index_grid(x: Variable) -> tuple[Variable, Variable]:
    """Row and column indices of x's last two axes, as (n, 1) and (1, n) (n may be known at run time only)."""
    r = arange(shape_tuple(x)[-1])
    return expand_dims(r, -1), expand_dims(r, 0)


def _triangle(x: Variable, lower: bool, strict: bool = False) -> Variable:
    """x with the entries outside its lower (upper) triangle set to 0."""
    i, j = _index_grid(x)
    inside = (greater if strict else greater_equal)(*((i, j) if lower else (j, i)))
    return where(inside, x, 0.0)


def _phi(x: Variable) -> Variable:
    """Φ(x): the lower triangle with the diagonal halved (Murray 2016)."""
    i, j = _index_grid(x)
    return where(greater(i, j), x, where(equal(i, j), 0.5 * x, 0.0))


def _scaled_identity(c: Variable, like: Variable) -> Variable:
    """c[..., None, None] · I, with I of `like`'s matrix size (a cotangent spread on the diagonal)."""
    i, j = _index_grid(like)
    return where(equal(i, j), expand_dims(expand_dims(c, -1), -1), 0.0)


def _as_columns(b: Variable, *vs: Variable) -> list[Variable]:
    """vs as column matrices where b is a vector (the solves' pullbacks work on matrices)."""
    return [expand_dims(v, -1) if b.ndim == 1 else v for v in vs]


def _batched(fn, a: np.ndarray, b: np.ndarray, vector: bool) -> np.ndarray:
    """fn(a_i, b_i) over the broadcast batch axes of a and b (b a vector: the same b for each a_i)."""
    a, b = np.asarray(a), np.asarray(b)
    core = 1 if vector else 2
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[: b.ndim - core])
    a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = np.broadcast_to(b, (*batch, *b.shape[b.ndim - core :]))
    out = np.empty(b.shape, dtype=np.result_type(a.dtype, b.dtype))
    for index in np.ndindex(*batch):
        out[index] = fn(a[index], b[index])
    return out


# -- cholesky --------------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Cholesky(Op):
    """The lower Cholesky factor L of a symmetric positive-definite A = L Lᵀ (numpy.linalg.cholesky).

    Reads only the lower triangle of A (as NumPy/LAPACK do), so its gradient is lower
    triangular too.  The pullback (Murray 2016) reads L only: with P = Φ(Lᵀ L̄) and
    S = L⁻ᵀ P L⁻¹ (two triangular solves), Ā = Φ(S + Sᵀ).  A perturbation of the strict
    lower triangle moves both mirrored entries of the matrix the factor sees, hence S + Sᵀ;
    the diagonal once, hence the half.
    `on_error`: "raise" (NumPy's LinAlgError, as an error naming the op) or "nan" (the
    lower triangle of that matrix NaN, as XLA's factor is).
    """

    on_error: str = "raise"

    reads = READS_OUTPUTS

    def infer(self, a):
        _square(self.name, a)
        return [TensorType(_float_type(self.name, a), a.type.shape)]

    def perform(self, a):
        if self.on_error == "raise":
            return np.linalg.cholesky(a)
        out = np.empty_like(a)  # (a is float32 or float64: `infer` checked)
        for index in np.ndindex(*a.shape[:-2]):
            try:
                out[index] = np.linalg.cholesky(a[index])
            except np.linalg.LinAlgError:
                out[index] = np.tril(np.full(a.shape[-2:], np.nan))
        return out

    def pullback(self, inputs, outputs, grads):
        (l,), (g,) = outputs, grads
        p = _phi(matmul(_mt(l), g))
        y = solve_triangular(l, p, lower=True, trans=1)  # L⁻ᵀ P
        s = _mt(solve_triangular(l, _mt(y), lower=True, trans=1))  # (L⁻ᵀ (L⁻ᵀ P)ᵀ)ᵀ = L⁻ᵀ P L⁻¹
        return [_phi(s + _mt(s))]


def cholesky(a, on_error: str = "raise"):
    """The lower Cholesky factor of a symmetric positive-definite matrix (or stack), numpy.linalg.cholesky.

    Only the lower triangle of `a` is read.  A matrix that is not positive definite:
    with `on_error="raise"` (the default) an error when the function runs on NumPy or
    Numba, and NaNs on JAX (compiled code cannot raise; jax.numpy does the same); with
    `on_error="nan"` on every backend the lower triangle of that matrix is NaN (so its
    log-density is NaN, which a sampler rejects), the other matrices of a stack unaffected.

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.matrix("a")
    >>> sg.function([a], sg.linalg.cholesky(a))(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    >>> sg.function([a], sg.linalg.cholesky(a, on_error="nan"))(np.array([[1.0, 2.0], [2.0, 1.0]])).tolist()
    [[nan, 0.0], [nan, nan]]
    """
    if on_error not in ("raise", "nan"):
        raise ShapeError(f"cholesky: on_error must be 'raise' or 'nan', got {on_error!r}")
    (a,) = _operands("cholesky", a)
    return Cholesky(on_error)(a)


# -- triangular solve ------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class SolveTriangular(Op):
    """x with op(A) x = b for a triangular A, op(A) = A or Aᵀ (scipy.linalg.solve_triangular).

    Reads only A's triangle (not its diagonal with `unit_diagonal`), so Ā is masked to it.
    Pullback, with x̄ the cotangent: b̄ = op(A)⁻ᵀ x̄ (the other transpose, one more solve),
    Ā = -b̄ xᵀ, transposed when op(A) = Aᵀ.
    """

    lower: bool = True
    trans: int = 0
    unit_diagonal: bool = False
    reads = Reads(inputs=(0,), outputs=(0,))  # A for the solve, x for the outer product

    def infer(self, a, b):
        return [TensorType(_float_type(self.name, a, b), _solve_shape(self.name, a, b))]

    def perform(self, a, b):
        def solve(ai, bi):
            return sla.solve_triangular(
                ai, bi, lower=self.lower, trans=self.trans, unit_diagonal=self.unit_diagonal, check_finite=False
            )

        return _batched(solve, a, b, vector=np.ndim(b) == 1)

    def pullback(self, inputs, outputs, grads):
        (a, b), (x,), (g,) = inputs, outputs, grads
        xm, gm = _as_columns(b, x, g)
        gb = SolveTriangular(self.lower, 1 - self.trans, self.unit_diagonal)(a, gm)
        ga = -matmul(xm, _mt(gb)) if self.trans else -matmul(gb, _mt(xm))
        ga = _triangle(ga, self.lower, strict=self.unit_diagonal)
        gb = squeeze(gb, -1) if b.ndim == 1 else gb
        return [reduce_to(ga, shape_tuple(a)), reduce_to(gb, shape_tuple(b))]


def solve_triangular(a, b, lower: bool = True, trans=0, unit_diagonal: bool = False):
    """x solving op(a) x = b, a triangular (scipy.linalg.solve_triangular), batched over leading axes.

    `trans`: 0 or "N" solves a x = b, 1 or "T" (and, for real matrices, 2 or "C") aᵀ x = b.
    `b` is a vector when it is 1-D, else a stack of (n, k) matrices (NumPy 2's rule); batch
    axes broadcast.  Only the `lower` (else upper) triangle of `a` is read.

    >>> import numpy as np, stablegrad as sg
    >>> a, b = sg.matrix("a"), sg.vector("b")
    >>> f = sg.function([a, b], sg.linalg.solve_triangular(a, b, lower=True))
    >>> f(np.array([[2.0, 0.0], [1.0, 4.0]]), np.array([2.0, 9.0])).tolist()
    [1.0, 2.0]
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a, b = _operands("solve_triangular", a, b)
    return SolveTriangular(bool(lower), _TRANS[trans], bool(unit_diagonal))(a, b)


# -- general solve ---------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Solve(Op):
    """x with A x = b (numpy.linalg.solve: LU with partial pivoting, batch axes broadcast).

    Pullback: b̄ = A⁻ᵀ x̄ (a solve with Aᵀ), Ā = -b̄ xᵀ.
    """

    reads = Reads(inputs=(0,), outputs=(0,))

    def infer(self, a, b):
        return [TensorType(_float_type(self.name, a, b), _solve_shape(self.name, a, b))]

    def perform(self, a, b):
        if np.ndim(b) == 1 and np.ndim(a) > 2:  # NumPy 2 takes a 1-D b as one vector for every matrix
            return np.linalg.solve(a, b[:, None])[..., 0]
        return np.linalg.solve(a, b)

    def pullback(self, inputs, outputs, grads):
        (a, b), (x,), (g,) = inputs, outputs, grads
        xm, gm = _as_columns(b, x, g)
        gb = solve(_mt(a), gm)
        ga = -matmul(gb, _mt(xm))
        gb = squeeze(gb, -1) if b.ndim == 1 else gb
        return [reduce_to(ga, shape_tuple(a)), reduce_to(gb, shape_tuple(b))]


def solve(a, b):
    """x solving a x = b (numpy.linalg.solve), batched over leading axes.

    `b` is a vector when it is 1-D, else a stack of (n, k) matrices (NumPy 2's rule); batch
    axes broadcast.  A singular `a` is an error when the function runs on NumPy and Numba.

    >>> import numpy as np, stablegrad as sg
    >>> a, b = sg.matrix("a"), sg.vector("b")
    >>> sg.function([a, b], sg.linalg.solve(a, b))(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([3.0, 5.0])).tolist()
    [0.8, 1.4]
    """
    a, b = _operands("solve", a, b)
    return Solve()(a, b)


# -- inverse ---------------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Inv(Op):
    """A⁻¹ (numpy.linalg.inv).  Pullback, from the output X alone: Ā = -Xᵀ X̄ Xᵀ."""

    reads = READS_OUTPUTS

    def infer(self, a):
        _square(self.name, a)
        return [TensorType(_float_type(self.name, a), a.type.shape)]

    def perform(self, a):
        return np.linalg.inv(a)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = outputs, grads
        xt = _mt(x)
        return [-matmul(matmul(xt, g), xt)]


def inv(a):
    """The inverse of a square matrix or stack (numpy.linalg.inv).  To apply it, `solve` is more accurate.

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.matrix("a")
    >>> sg.function([a], sg.linalg.inv(a))(np.array([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    (a,) = _operands("inv", a)
    return Inv()(a)


# -- determinants ----------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Det(Op):
    """det A (numpy.linalg.det).  Pullback: Ā = (ḡ·det A)·A⁻ᵀ, as one solve with Aᵀ (not an inverse).

    A singular A has a gradient (its adjugate) that this formula cannot reach: the solve fails.
    """

    reads = Reads(inputs=(0,), outputs=(0,))

    def infer(self, a):
        batch = _square(self.name, a)
        return [TensorType(_float_type(self.name, a), batch)]

    def perform(self, a):
        return np.asarray(np.linalg.det(a))

    def pullback(self, inputs, outputs, grads):
        (a,), (d,), (g,) = inputs, outputs, grads
        return [solve(_mt(a), _scaled_identity(g * d, a))]


def det(a):
    """The determinant of a square matrix or stack (numpy.linalg.det); `slogdet` does not overflow.

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.matrix("a")
    >>> round(float(sg.function([a], sg.linalg.det(a))(np.array([[2.0, 1.0], [1.0, 3.0]]))), 12)
    5.0
    """
    (a,) = _operands("det", a)
    return Det()(a)


@final
@dataclass(frozen=True)
class Slogdet(Op):
    """(sign, log|det A|) (numpy.linalg.slogdet, from an LU factorization with partial pivoting).

    The log of the product of the pivots is the sum of their logs, so it neither overflows
    nor underflows; LU is backward stable, so an ill-conditioned SPD matrix keeps its digits
    (Hilbert 8×8, condition 1.5e10: log det to 1e-10 relative).
    Pullback: the sign is piecewise constant; d log|det A| = tr(A⁻¹ dA), so Ā = ḡ·A⁻ᵀ,
    computed as solve(Aᵀ, ḡ·I) (backward stable, unlike inv(A)ᵀ·ḡ).
    """

    nout = 2  # type: ignore[assignment]
    reads = Reads(inputs=(0,), outputs=())

    def infer(self, a):
        batch = _square(self.name, a)
        dtype = _float_type(self.name, a)
        return [TensorType(dtype, batch), TensorType(dtype, batch)]

    def perform(self, a):
        sign, logabsdet = np.linalg.slogdet(a)
        return np.asarray(sign), np.asarray(logabsdet)

    def pullback(self, inputs, outputs, grads):
        (a,), (_, g) = inputs, grads
        if isinstance(g, Zero):
            return [Zero(a.type)]
        return [solve(_mt(a), _scaled_identity(g, a))]


def slogdet(a):
    """(sign, log|det a|) of a square matrix or stack (numpy.linalg.slogdet).

    Accurate where det itself under- or overflows; differentiable in its second output
    (the sign's gradient is zero).

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.matrix("a")
    >>> sign, logdet = sg.function([a], sg.linalg.slogdet(a))(np.diag([1e-200, -1e-200]))
    >>> float(sign), round(float(logdet), 6)
    (-1.0, -921.034037)
    """
    (a,) = _operands("slogdet", a)
    return tuple(Slogdet()(a))
