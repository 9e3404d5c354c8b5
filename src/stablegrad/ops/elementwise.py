"""Arithmetic, comparison, logic, selection and casts: the elementwise basics.

Each op is forward (`perform`) and derivative (`pullback`) side by side.  Pullbacks
return gradients shaped like the *output*; `grad` sums them back to each operand's
shape where broadcasting widened it, so no op repeats that bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np

from ..errors import DTypeError
from ..graph.basic import READS_NOTHING, READS_OUTPUTS, Constant, Reads, Variable
from ..graph.types import is_inexact
from .base import Cast as Cast  # casts belong to this family; defined in base, which needs them for operands
from .base import Elementwise, as_operands, astype, zero_grad


# -- arithmetic ------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Add(Elementwise):
    """x + y."""

    reads = READS_NOTHING

    def perform(self, x, y):
        return np.add(x, y)

    def pullback(self, inputs, outputs, grads):
        return [grads[0], grads[0]]


@final
@dataclass(frozen=True)
class Subtract(Elementwise):
    """x - y."""

    reads = READS_NOTHING

    def perform(self, x, y):
        return np.subtract(x, y)

    def pullback(self, inputs, outputs, grads):
        return [grads[0], -grads[0]]


@final
@dataclass(frozen=True)
class Multiply(Elementwise):
    """x * y."""

    def perform(self, x, y):
        return np.multiply(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        return [g * y, g * x]


@final
@dataclass(frozen=True)
class Divide(Elementwise):
    """x / y (true division)."""

    def perform(self, x, y):
        return np.true_divide(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        gx = g / y
        return [gx, -gx * x / y]


@final
@dataclass(frozen=True)
class FloorDivide(Elementwise):
    """x // y; piecewise constant, so no gradient flows."""

    reads = READS_NOTHING

    def perform(self, x, y):
        return np.floor_divide(x, y)

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(inputs[0]), zero_grad(inputs[1])]


@final
@dataclass(frozen=True)
class Mod(Elementwise):
    """x % y (sign of y, as NumPy); d/dx = 1, d/dy = -floor(x / y)."""

    def perform(self, x, y):
        return np.mod(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        return [g, -g * floor(x / y)]


@final
@dataclass(frozen=True)
class Maximum(Elementwise):
    """Elementwise maximum; at ties each side gets half the gradient (the symmetric choice)."""

    def perform(self, x, y):
        return np.maximum(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        tie = equal(x, y)
        return [where(tie, g * 0.5, where(greater(x, y), g, 0)), where(tie, g * 0.5, where(less(x, y), g, 0))]


@final
@dataclass(frozen=True)
class Minimum(Elementwise):
    """Elementwise minimum; at ties each side gets half the gradient."""

    def perform(self, x, y):
        return np.minimum(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        tie = equal(x, y)
        return [where(tie, g * 0.5, where(less(x, y), g, 0)), where(tie, g * 0.5, where(greater(x, y), g, 0))]


@final
@dataclass(frozen=True)
class Negative(Elementwise):
    """-x."""

    reads = READS_NOTHING

    def perform(self, x):
        return np.negative(x)

    def pullback(self, inputs, outputs, grads):
        return [-grads[0]]


@final
@dataclass(frozen=True)
class Abs(Elementwise):
    """|x|; the gradient at 0 is 0 (sign(0)).  For complex z, |z| is real and its gradient
    conj(z)/|z| (JAX's convention, see ops/complex_parts.py), written |z|/z: no conj op here."""

    def perform(self, x):
        return np.abs(x)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        if x.dtype.kind == "c":  # (|z| recomputed: the pullback reads only the operand)
            return [astype(g, x.dtype) * _unit_conjugate(x)]
        return [g * sign(x)]

    def pushforward(self, inputs, outputs, tangents):
        """d|z| = Re(conj(z)/|z| · dz) for complex z (not the pullback's map: |z| is not holomorphic)."""
        (x,), (t,) = inputs, tangents
        if t is None or x.dtype.kind != "c":
            return super().pushforward(inputs, outputs, tangents)
        # (a cast from complex to real keeps the real part: the real-part op lives above this module)
        return [astype(t * _unit_conjugate(x), outputs[0].dtype)]


def _unit_conjugate(z):
    """conj(z)/|z| written |z|/z (no conj op down here), 0 at z = 0."""
    zero = equal(z, 0)
    return where(zero, 0, astype(Abs()(z), z.dtype) / where(zero, 1, z))


@final
@dataclass(frozen=True)
class Square(Elementwise):
    """x**2."""

    def perform(self, x):
        return np.square(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * (2 * inputs[0])]


@final
@dataclass(frozen=True)
class Sqrt(Elementwise):
    """√x; reads its output: d√x = 1 / (2√x)."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.sqrt(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / (2 * outputs[0])]


@final
@dataclass(frozen=True)
class Reciprocal(Elementwise):
    """1 / x, for floats (NumPy's integer reciprocal truncates, so ints are promoted first)."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.reciprocal(x)

    def pullback(self, inputs, outputs, grads):
        out = outputs[0]
        return [-grads[0] * square(out)]


@dataclass(frozen=True)
class _PiecewiseConstant(Elementwise):
    """Abstract: ops that are flat almost everywhere; their gradient is a typed zero."""

    reads = READS_NOTHING

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(x) for x in inputs]


@final
@dataclass(frozen=True)
class Sign(_PiecewiseConstant):
    """sign(x) in {-1, 0, +1}."""

    def perform(self, x):
        return np.sign(x)


@final
@dataclass(frozen=True)
class Floor(_PiecewiseConstant):
    """Largest integer <= x."""

    def perform(self, x):
        return np.floor(x)


@final
@dataclass(frozen=True)
class Ceil(_PiecewiseConstant):
    """Smallest integer >= x."""

    def perform(self, x):
        return np.ceil(x)


@final
@dataclass(frozen=True)
class Round(_PiecewiseConstant):
    """Round half to even, to `decimals` places (NumPy's `round`)."""

    decimals: int = 0

    def perform(self, x):
        return np.round(x, self.decimals)


# -- comparison and logic: boolean outputs, no gradient ----------------------------------------
@final
@dataclass(frozen=True)
class Compare(_PiecewiseConstant):
    """x <op> y for op in <, <=, >, >=, ==, !=."""

    ufunc: str = "less"

    def perform(self, x, y):
        return getattr(np, self.ufunc)(x, y)

    @property
    def name(self) -> str:
        return self.ufunc


@final
@dataclass(frozen=True)
class Logical(_PiecewiseConstant):
    """Logical and/or/xor/not and the float predicates isnan/isinf/isfinite."""

    ufunc: str = "logical_and"

    def perform(self, *xs):
        return getattr(np, self.ufunc)(*xs)

    @property
    def name(self) -> str:
        return self.ufunc


# -- selection -----------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Where(Elementwise):
    """where(c, x, y); the gradient goes to the branch that was chosen, 0 to the other."""

    reads = Reads(inputs=(0,))

    def perform(self, c, x, y):
        return np.where(c, x, y)

    def pullback(self, inputs, outputs, grads):
        c, g = inputs[0], grads[0]
        return [zero_grad(c), where(c, g, 0), where(c, 0, g)]


@final
@dataclass(frozen=True)
class Clip(Elementwise):
    """clip(x, lo, hi); the gradient passes where lo <= x <= hi, and goes to the bound elsewhere."""

    def perform(self, x, lo, hi):
        return np.clip(x, lo, hi)

    def pullback(self, inputs, outputs, grads):
        (x, lo, hi), (g,) = inputs, grads
        below, above = less(x, lo), greater(x, hi)
        inside = logical_not(logical_or(below, above))
        return [where(inside, g, 0), where(below, g, 0), where(above, g, 0)]


# -- casts -----------------------------------------------------------------------------------------
# -- user-facing functions --------------------------------------------------------------------------
def _binary(op):
    def apply(x, y):
        return op(*as_operands(x, y))

    return apply


def _unary(op):
    def apply(x):
        return op(*as_operands(x))

    return apply


add = _binary(Add())
subtract = _binary(Subtract())
multiply = _binary(Multiply())
floor_divide = _binary(FloorDivide())
mod = _binary(Mod())
maximum = _binary(Maximum())
minimum = _binary(Minimum())
negative = _unary(Negative())
abs = _unary(Abs())
absolute = abs
square = _unary(Square())
sign = _unary(Sign())
floor = _unary(Floor())
ceil = _unary(Ceil())
less = _binary(Compare("less"))
less_equal = _binary(Compare("less_equal"))
greater = _binary(Compare("greater"))
greater_equal = _binary(Compare("greater_equal"))
equal = _binary(Compare("equal"))
not_equal = _binary(Compare("not_equal"))
logical_and = _binary(Logical("logical_and"))
logical_or = _binary(Logical("logical_or"))
logical_xor = _binary(Logical("logical_xor"))
logical_not = _unary(Logical("logical_not"))
isnan = _unary(Logical("isnan"))
isinf = _unary(Logical("isinf"))
isfinite = _unary(Logical("isfinite"))


def _float_operand(x) -> Variable:
    (x,) = as_operands(x)
    return x if x.type.is_float() else astype(x, np.result_type(x.dtype, np.float16, 1.0))


def divide(x, y):
    """x / y, true division as NumPy's `/`."""
    return Divide()(*as_operands(x, y))


true_divide = divide


def sqrt(x):
    """√x."""
    return Sqrt()(*as_operands(x))


def reciprocal(x):
    """1 / x (integers are promoted to float first, unlike NumPy's truncating reciprocal)."""
    return Reciprocal()(_float_operand(x))


def round(x, decimals: int = 0):
    """Round half to even."""
    return Round(int(decimals))(*as_operands(x))


def where(condition, x, y):
    """Entries of x where condition holds, else of y (NumPy's three-argument where)."""
    c, x, y = as_operands(condition, x, y)
    if c.dtype != np.bool_:
        c = astype(c, np.bool_)
    return Where()(c, x, y)


def clip(x, a_min=None, a_max=None):
    """Limit the values of x to [a_min, a_max]; a bound of None is no bound (numpy.clip).

    >>> import stablegrad as sg
    >>> sg.clip(sg.constant([-2.0, 0.5, 3.0]), -1.0, None).eval()
    array([-1. ,  0.5,  3. ])
    """
    if a_min is None and a_max is None:
        (x,) = as_operands(x)
        return x
    if a_min is None or a_max is None:
        # one bound: the other is the dtype's own extreme, so the result dtype stays NumPy's
        x, bound = as_operands(x, a_max if a_min is None else a_min)
        far = Constant(_extreme(np.result_type(x.dtype, bound.dtype), largest=a_max is None))
        return Clip()(x, bound, far) if a_max is None else Clip()(x, far, bound)
    return Clip()(*as_operands(x, a_min, a_max))


def _extreme(dtype: np.dtype, largest: bool) -> np.ndarray:
    """The value no entry of `dtype` lies beyond: ±inf, an integer type's bound, or True/False."""
    if is_inexact(dtype):
        value = np.inf if largest else -np.inf
    elif dtype.kind in "iu":
        value = np.iinfo(dtype).max if largest else np.iinfo(dtype).min
    else:
        value = largest
    return np.asarray(value, dtype)


def relu(x):
    """max(x, 0), entry by entry; its gradient at 0 is 0 (JAX's choice), and NaN stays NaN.

    >>> import stablegrad as sg
    >>> sg.relu(sg.constant([-1.0, 0.0, 2.0])).eval()
    array([0., 0., 2.])
    """
    (x,) = as_operands(x)
    # where rather than maximum: maximum splits the gradient in half at the tie x == 0
    return where(less_equal(x, 0), np.zeros((), x.dtype), x)


def invert(x):
    """Bitwise not is not supported; `~` on a boolean tensor is logical_not."""
    raise DTypeError(f"invert: `~` needs a boolean tensor, got {x.type}")
