"""What every op family shares: turning arguments into variables, the elementwise base, and casts.

`Elementwise` ops broadcast their operands like NumPy ufuncs, and their output
dtype is *defined* as the dtype NumPy gives for their `perform`: the rule is read
off NumPy itself once per (op, dtypes) and cached, so promotion (NEP 50 included)
can never drift from NumPy's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ..errors import DTypeError
from ..graph import hooks, names
from ..graph.basic import READS_NOTHING, Constant, Op, Variable, Zero
from ..graph.types import TensorType, as_dtype, broadcast_shapes, is_bfloat16, is_floating, is_inexact, is_numeric

_PYTHON_SCALARS = (bool, int, float, complex)


def as_tensor(x, dtype=None) -> Variable:
    """A Variable as is, anything array-like as a Constant."""
    if isinstance(x, Variable):
        return x
    return Constant(np.asarray(x, dtype=dtype))


def as_operands(*args) -> list[Variable]:
    """Variables for an op's operands, with Python scalars *weak* (NEP 50).

    A Python scalar takes the dtype NumPy would give it next to the other operands,
    so `float32_var * 2.0` stays float32 and `int_var + 2.5` becomes float64.
    Unknown extents (`x.shape[i]`, `x.size`) are weak next to floats too: NumPy has
    them as Python ints, so `x / x.shape[1]` keeps x's dtype whether or not the extent
    is static.  (Next to small integer types they stay int64: a cast could wrap.)
    """
    extents = [_is_extent(a) for a in args]
    if not any(extents) and all(isinstance(a, Variable) for a in args):
        return list(args)
    strong = [
        a.dtype if isinstance(a, Variable) else np.asarray(a).dtype
        for a, extent in zip(args, extents)
        if not (extent or _is_scalar(a))
    ]
    for dtype in strong:
        if not is_numeric(dtype):
            raise DTypeError(f"operands must be numeric or boolean, got dtype {dtype} (a {dtype.kind!r}-kind array)")
    result = []
    weak_dtype = np.result_type(*strong, 0) if strong else None
    for a, extent in zip(args, extents):
        if extent and weak_dtype is not None and is_inexact(weak_dtype):
            result.append(astype(a, weak_dtype))
        elif isinstance(a, Variable):
            result.append(a)
        elif _is_scalar(a):
            dtype = np.result_type(*strong, a) if strong else np.asarray(a).dtype
            try:
                result.append(Constant(np.asarray(a, dtype=dtype)))
            except OverflowError:  # NumPy 2 refuses a Python int past the range of the tensor's integer type
                raise DTypeError(
                    f"the Python integer {a} does not fit {dtype.name}, the dtype of the tensor it meets; "
                    f"cast the tensor first (x.astype('int64')) or write {a}.0 for float arithmetic"
                ) from None
        else:
            result.append(Constant(np.asarray(a)))
    return result


def _is_scalar(a) -> bool:
    return isinstance(a, _PYTHON_SCALARS) and not isinstance(a, np.generic)


_EXTENT_ARITHMETIC = ("add", "subtract", "multiply", "floor_divide")


def _is_extent(a) -> bool:
    """A 0-d int64 computed from extents only (ShapeDim, and +, -, *, // of those and int constants)."""
    if not isinstance(a, Variable) or a.ndim != 0 or a.dtype != np.int64 or a.owner is None:
        return False
    op = a.owner.op
    if op.name == "shape_dim":
        return True
    return op.name in _EXTENT_ARITHMETIC and all(
        _is_extent(v) or (isinstance(v, Constant) and v.ndim == 0 and v.dtype.kind == "i") for v in a.owner.inputs
    )


def zero_grad(x: Variable) -> Zero:
    return Zero(x.type)


@functools.cache
def _numpy_result_dtype(op: Op, dtypes: tuple[np.dtype, ...]) -> np.dtype:
    with np.errstate(all="ignore"):
        return np.asarray(op.perform(*[np.ones((), dt) for dt in dtypes])).dtype


def _widened_result(op: Op, dtypes: tuple[np.dtype, ...]) -> bool:
    """Whether NumPy answers `op` on these (bfloat16) operands in a wider float than bfloat16."""
    try:
        dtype = _numpy_result_dtype(op, dtypes)
    except (TypeError, ValueError):  # no loop at all: float32 has one
        return True
    return is_floating(dtype) and not is_bfloat16(dtype)


class Linear:
    """Mixin for ops linear in their first operand whose other operands (extents, indices)
    have no tangent: the pushforward is the op itself, applied to the tangent."""

    def pushforward(self, inputs, outputs, tangents):
        if tangents[0] is None:
            return [None] * len(outputs)
        return [self(tangents[0], *inputs[1:])]  # type: ignore[operator]  # (mixed into Op subclasses)


class Entrywise:
    """Mixin for ops that act entry by entry with NumPy broadcasting (`Elementwise`, and the
    stable family's `softplus`, `logaddexp`, `xlogy`, ...; rewrites that commute with layout
    ask for it).  In user code, named operands broadcast by name instead (`graph.names`): they
    are laid out in the result's dims first, and the result carries those dims."""

    def __call__(self, *inputs: Variable):
        if not any(v.dims is not None for v in inputs) or not names.active():
            return super().__call__(*inputs)  # type: ignore[misc]  # (mixed into Op subclasses)
        aligned, dims = hooks.align_dims.get()(self.name, inputs)  # type: ignore[attr-defined]
        with names.positional():
            result = super().__call__(*aligned)  # type: ignore[misc]
        for out in result if isinstance(result, tuple) else (result,):
            out.dims = dims
        return result


@dataclass(frozen=True)
class Elementwise(Entrywise, Op):
    """Abstract: an op applied entry by entry with NumPy broadcasting."""

    #: whether bfloat16 operands that NumPy (or SciPy) has no bfloat16 loop for compute in float32
    widens_bfloat16: ClassVar[bool] = True

    def __call__(self, *inputs: Variable):
        """As JAX, an op of bfloat16 operands gives bfloat16.  ml_dtypes gives NumPy bfloat16 loops
        for the arithmetic and the exp/log family; where it has none (SciPy's special functions,
        `clip`), NumPy answers in float32 or float64: such an op computes in float32 and its result
        is rounded once to bfloat16."""
        if self.widens_bfloat16 and any(is_bfloat16(v.dtype) for v in inputs):
            dtypes = tuple(v.dtype for v in inputs)
            if is_bfloat16(np.result_type(*dtypes)) and _widened_result(self, dtypes):
                wide = [astype(v, np.float32) if is_bfloat16(v.dtype) else v for v in inputs]
                result = super().__call__(*wide)
                narrow = np.result_type(*dtypes)
                if isinstance(result, tuple):
                    return tuple(astype(r, narrow) if is_floating(r.dtype) else r for r in result)
                return astype(result, narrow) if is_floating(result.dtype) else result
        return super().__call__(*inputs)

    def infer(self, *inputs: Variable) -> list[TensorType]:
        shape = broadcast_shapes(*(v.type.shape for v in inputs), op=self.name)
        dtypes = tuple(v.dtype for v in inputs)
        try:
            dtype = _numpy_result_dtype(self, dtypes)
        except (TypeError, ValueError) as exc:  # NumPy has no loop for these dtypes (strings, say)
            listed = ", ".join(d.name for d in dtypes)
            raise DTypeError(f"{self.name}: unsupported operand dtype(s) {listed} ({exc})") from None
        return [TensorType(dtype, shape)]

    def pushforward(self, inputs, outputs, tangents):
        """Σᵢ ∂y/∂xᵢ · ẋᵢ.  An entrywise op's Jacobian in each operand is diagonal, and its
        pullback term for operand i is that diagonal times the cotangent, before any sum over
        broadcast axes: so it is the tangent's term too, with the tangent as cotangent.  (The
        sum may be narrower than y where operands without a tangent widen it; forward mode
        broadcasts it then.)"""
        (y,) = outputs
        total = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            term = self.pullback(inputs, outputs, [astype(t, y.dtype)])[i]
            if not isinstance(term, Zero):
                total = term if total is None else total + term
        return [total]


# -- casts: every family converts dtypes (as_operands above does, for extents next to floats) -----------
@final
@dataclass(frozen=True)
class Cast(Elementwise):
    """x.astype(dtype); float-to-float casts pass the gradient back in the source dtype."""

    dtype: np.dtype = np.dtype("float64")
    reads = READS_NOTHING
    widens_bfloat16: ClassVar[bool] = False  # a cast is what the widening is made of

    def infer(self, x):
        return [TensorType(self.dtype, x.type.shape)]

    def perform(self, x):
        x = np.asarray(x)
        if x.dtype.kind == "c" and self.dtype.kind != "c":  # NumPy's astype keeps the real part, with a warning
            x = np.real(x)
        return x.astype(self.dtype, copy=False)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        if not (x.type.is_float() and is_inexact(self.dtype)):
            return [zero_grad(x)]
        return [astype(g, x.dtype)]

    def pushforward(self, inputs, outputs, tangents):
        (t,) = tangents
        return [astype(t, self.dtype) if t is not None and is_inexact(self.dtype) else None]

    @property
    def name(self) -> str:
        return f"astype[{self.dtype.name}]"


def astype(x, dtype):
    """x converted to dtype (a no-op when it already has it)."""
    (x,) = as_operands(x)
    dtype = as_dtype(dtype, "astype")
    return x if x.dtype == dtype else Cast(dtype)(x)
