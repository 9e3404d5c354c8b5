"""Entries whose result is inf or NaN, evaluated once more with an exponent that cannot overflow.

A formula can leave the float range on the way to an answer that is in it: `-n·t²/sinh(t·τ)²`
at t = 1e200 is inf/inf as written and 0 in fact, and its gradient meets 0·inf in the chain
rule (`exp(-E)·poly` at E = 1e104: the exp is 0, the polynomial's cotangent inf).  No rewrite of
the graph removes every such meeting: the chain rule multiplies partials node by node.

So `sg.function` (with recognition, on every backend) looks at the outputs of a graph
that acts entry by entry: where an output is inf or NaN and the inputs are finite, those entries
run the same graph again, node by node and in the same order, on *wide* numbers — a float64
significand and a float64 exponent (`frexp` pairs).  That is the formula as written, with its
roundings, in a float whose range does not end: a partial result of 1e400 is 1e400, and the
answer is rounded into the dtype at the end.  What is NaN for a reason other than range stays
NaN: log of a negative, inf - inf of infinite inputs, 0·inf of an exact 0 and an infinite input.

Exponents are integers, added exactly, up to 2⁵³.  Past that (exp(x) for x beyond 6e15) the
exponent rounds as the float x that made it did, so such a number is as uncertain as x makes
it; past ±1e300 it is ±inf or 0, so that two such exponents never cancel into a finite answer.

The arithmetic (+ - · / √, squares, where, comparisons) and the functions whose results leave
the range soonest (exp, expm1, log, log1p, power, sinh, cosh, sech, sech², xlogy, the trees of
`Monomial`s) are computed wide, and so are those whose value at a tiny or huge operand the
float function gives (tanh, sin, erf, sigmoid, ...).  Any other op computes in its dtype from
its operands rounded into it, and is NaN where an operand was not in its range (a guess from
gammaln(inf) could be a finite wrong answer).  Entries where nothing left the range give the
same bits as the first pass.

>>> import numpy as np, stablegrad as sg
>>> t = sg.vector("t")
>>> f = sg.function([t], sg.exp(-t * t) * (t * t * t))  # 0·inf at t = 1e103
>>> f(np.array([2.0, 1e103]))
array([0.14652511, 0.        ])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..graph.basic import Apply, Constant
from ..graph.fgraph import FunctionGraph
from ..graph.types import is_floating
from ..ops.base import Cast, Entrywise
from ..ops.elementwise import (
    Abs,
    Add,
    Compare,
    Divide,
    Logical,
    Maximum,
    Minimum,
    Multiply,
    Negative,
    Reciprocal,
    Sign,
    Sqrt,
    Square,
    Subtract,
    Where,
)
from ..ops.gradient_mask import MaskedGradient
from ..ops.math import Arctan, Cos, Cosh, Erf, Erfc, Exp, Expm1, Log, Log1p, Power, SechSquared, Sin, Sinh, Tan, Tanh
from ..ops.monomial import Monomial, evaluate
from ..ops.partials import AffineProduct, AffineQuotient, OverArgument
from ..ops.shape import BroadcastTo, ExpandDims, ReduceTo, ShapeDim
from ..ops.stable.sech import Sech
from ..ops.stable.softplus import Sigmoid
from ..ops.stable.xlogy import XLog1PY, XLogY
from .numpy_program import implementation

#: a wide number: (significand in [0.5, 1), or 0, ±inf or NaN; exponent, 0 for those)
Wide = tuple[np.ndarray, np.ndarray]

#: exponents past ±1e300 make the number ±inf or 0 (so that two never add up to inf, and a
#: saturated exponent never cancels against another into a finite wrong answer)
_FAR = 1e300
#: shifts past this leave nothing of a float64 significand
_GONE = 1100
#: past 2^±2200 a float64 is 0 or inf whatever its significand
_NARROWED = 2200
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = hi + lo, hi of 32 bits
_LOG2E = 1.4426950408889634


# -- wide numbers ------------------------------------------------------------------------------------------------
def wide(x) -> Wide:
    """A float array as wide numbers (exactly)."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return m, e.astype(np.float64)


def _has_exponent(m: np.ndarray) -> np.ndarray:
    """Where a significand carries an exponent: not 0, ±inf or NaN (stored with exponent 0)."""
    return np.isfinite(m) & (m != 0)


def _normalized(m: np.ndarray, e: np.ndarray) -> Wide:
    s, shift = np.frexp(m)
    e = e + shift
    s = np.where(e > _FAR, np.copysign(np.inf, s), np.where(e < -_FAR, np.copysign(0.0, s), s))
    return s, np.where(_has_exponent(s), e, 0)


def _times_power_of_two(a: Wide, k: int) -> Wide:
    """a·2^k, exactly: the exponent moves (0, ±inf and NaN stay as they are)."""
    m, e = a
    return m, np.where(_has_exponent(m), e + k, e)


def narrow(w: Wide, dtype=np.float64) -> np.ndarray:
    """Wide numbers rounded into `dtype`: ±inf past its largest, 0 (or subnormal) below its smallest."""
    m, e = w
    return np.ldexp(m, np.clip(e, -_NARROWED, _NARROWED).astype(np.int32)).astype(dtype)


def _in_range(w: Wide, dtype=np.float64) -> np.ndarray:
    """Where the wide number is a normal number of `dtype` (or 0, ±inf or NaN)."""
    info = np.finfo(dtype)
    return (w[1] <= info.maxexp) & (w[1] >= info.minexp + 1)


def _select(c, a: Wide, b: Wide) -> Wide:
    return np.where(c, a[0], b[0]), np.where(c, a[1], b[1])


def multiply(a: Wide, b: Wide) -> Wide:
    return _normalized(a[0] * b[0], a[1] + b[1])


def divide(a: Wide, b: Wide) -> Wide:
    return _normalized(a[0] / b[0], a[1] - b[1])


def negative(a: Wide) -> Wide:
    return -a[0], a[1]


def add(a: Wide, b: Wide) -> Wide:
    (m1, e1), (m2, e2) = a, b
    # the larger exponent sets the scale; a 0, inf or NaN has none (its exponent is 0 as stored)
    scale = np.maximum(np.where(_has_exponent(m1), e1, -np.inf), np.where(_has_exponent(m2), e2, -np.inf))
    scale = np.where(scale == -np.inf, 0, scale)
    first, second = (np.ldexp(m, np.clip(e - scale, -_GONE, 0).astype(np.int32)) for m, e in (a, b))
    return _normalized(first + second, scale)


def subtract(a: Wide, b: Wide) -> Wide:
    return add(a, negative(b))


def square_root(a: Wide) -> Wide:
    m, e = a
    odd = np.mod(e, 2) != 0
    return _normalized(np.sqrt(np.where(odd, 2 * m, m)), (e - odd) / 2)


def exp(a: Wide) -> Wide:
    x = narrow(a)
    direct = np.exp(x)
    # 2ⁿ·exp(r) with r = x - n·ln 2 in [-ln 2/2, ln 2/2].  n·hi is exact below |n| = 2²¹; above, r
    # carries n·ln 2's rounding, a relative error of about |x|·2⁻⁵³, which is what exp's condition
    # number |x| makes of x's own rounding.  Past |n| = 2⁵² n·ln 2 has no digits below 1 left
    # and the answer is 2ⁿ, its significand as unknown as x's last digits make it.
    clipped = np.clip(x, -_FAR, _FAR)
    n = np.rint(clipped * _LOG2E)
    r = np.where(np.abs(n) < 2.0**52, (clipped - n * _LN2_HI) - n * _LN2_LO, 0.0)
    far = _normalized(np.exp(r), np.nan_to_num(n, nan=0.0))
    # (past the range x itself is ±inf, and exp(x) inf or 0: its exponent is no float)
    keep = (np.abs(direct) >= np.finfo(np.float64).tiny) & np.isfinite(direct) | ~np.isfinite(x)
    return _select(keep, wide(direct), far)


def log(a: Wide) -> Wide:
    m, e = a
    far = np.log(m) + e * _LN2_HI + e * _LN2_LO
    return wide(np.where(_in_range(a), np.log(narrow(a)), far))


def log1p(a: Wide) -> Wide:
    m, e = a
    tiny = e < -60  # log1p(x) = x to the last bit
    return _select(tiny & (m != 0), a, _select(e > 60, log(a), wide(np.log1p(narrow(a)))))


def expm1(a: Wide) -> Wide:
    m, e = a
    tiny = e < -60
    x = narrow(a)
    direct = wide(np.expm1(x))
    return _select(tiny & (m != 0), a, _select(x > 700, exp(a), direct))


def _exp_of_magnitude_over_two(a: Wide) -> Wide:
    return _times_power_of_two(exp((np.abs(a[0]), a[1])), -1)


def _odd(f: Callable[[np.ndarray], np.ndarray]) -> Callable[[Wide], Wide]:
    """A function with f(x) = x to the last bit below 2⁻⁶⁰, as f of the float elsewhere (which is
    right past the range too for the functions that use it: sin(inf) is NaN, tanh(inf) 1)."""

    def odd(a: Wide) -> Wide:
        return _select((a[1] < -60) & (a[0] != 0), a, wide(f(narrow(a))))

    return odd


def sinh(a: Wide) -> Wide:
    far = _exp_of_magnitude_over_two(a)
    return _select(np.abs(narrow(a)) < 700, _odd(np.sinh)(a), (np.copysign(far[0], a[0]), far[1]))


def sech(a: Wide) -> Wide:
    far = _times_power_of_two(exp((-np.abs(a[0]), a[1])), 1)  # 2·e^(-|x|)
    x = narrow(a)
    return _select(np.abs(x) < 700, wide(Sech().perform(x)), far)


def _erf(a: Wide) -> Wide:
    tiny = (a[1] < -60) & (a[0] != 0)  # erf(x) = 2x/√π to the last bit
    return _select(tiny, multiply(a, wide(np.float64(1.1283791670955126))), wide(Erf().perform(narrow(a))))


def cosh(a: Wide) -> Wide:
    return _select(np.abs(narrow(a)) < 700, wide(np.cosh(narrow(a))), _exp_of_magnitude_over_two(a))


def sech_squared(a: Wide) -> Wide:
    far = _times_power_of_two(exp((-2 * np.abs(a[0]), a[1])), 2)  # 4·e^(-2|x|): the 1 + e^(-2|x|) below it is 1
    x = narrow(a)
    return _select(np.abs(x) < 300, wide(SechSquared().perform(x)), far)


def power(a: Wide, b: Wide) -> Wide:
    x, y = narrow(a), narrow(b)
    direct = np.power(x, y)
    normal = (np.abs(direct) >= np.finfo(np.float64).tiny) & np.isfinite(direct)
    special = ~np.isfinite(a[0]) | (a[0] == 0) | ~np.isfinite(y) | (y == 0) | np.isnan(direct)
    # |x|^y = 2^(y·log₂|x|): n + f with f in [0, 1); the sign is x's for an odd integer y
    bits = y * (np.log2(np.abs(a[0])) + a[1])
    n = np.floor(np.clip(bits, -_FAR, _FAR))
    negative = a[0] < 0
    sign = np.where(negative & (np.mod(y, 2) == 1), -1.0, np.where(negative & (np.mod(y, 1) != 0), np.nan, 1.0))
    far = _normalized(sign * np.exp2(bits - n), np.nan_to_num(n))
    return _select((normal & _in_range(a) & _in_range(b)) | special, wide(direct), far)


def _xlog(log_of: Callable[[Wide], Wide]) -> Callable[[Wide, Wide], Wide]:
    def xlog(a: Wide, b: Wide) -> Wide:
        product = multiply(a, log_of(b))
        zero = (a[0] == 0) & ~np.isnan(b[0])  # xlogy's 0 at x = 0, whatever log(y)
        return _select(zero, wide(np.zeros_like(a[0])), product)

    return xlog


def _compare(op: Compare, a: Wide, b: Wide) -> np.ndarray:
    """Where both are floats as they are, the float comparison; elsewhere the difference's sign."""
    floats = getattr(np, op.ufunc)(narrow(a), narrow(b))
    sign = subtract(a, b)[0]
    return np.where(_in_range(a) & _in_range(b), floats, getattr(np, op.ufunc)(sign, 0))


def _extreme(pick_first: Callable) -> Callable[[Wide, Wide], Wide]:
    def extreme(a: Wide, b: Wide) -> Wide:
        first = pick_first(subtract(a, b)[0]) | np.isnan(a[0])  # NaN wins, as np.maximum's
        return _select(first, a, b)

    return extreme


def _logical(op: Logical, *xs) -> np.ndarray:
    """isnan / isinf / isfinite ask the significand (a wide 1e400 is finite); the rest are booleans."""
    return getattr(np, op.ufunc)(*(x[0] if isinstance(x, tuple) else x for x in xs))


def _cast(op: Cast, a: Wide) -> Wide:
    return _normalized(a[0].astype(op.dtype).astype(np.float64), a[1])


#: the tree of a Monomial, on wide numbers
_TREE: dict[str, Callable] = {
    "multiply": multiply,
    "divide": divide,
    "negative": negative,
    "square": lambda a: multiply(a, a),
    "reciprocal": lambda a: divide(wide(np.ones_like(a[0])), a),
}

#: ops computed on wide numbers: type → function of the op and its operands
WIDE: dict[type, Callable[..., Any]] = {
    Add: lambda op, a, b: add(a, b),
    Subtract: lambda op, a, b: subtract(a, b),
    Multiply: lambda op, a, b: multiply(a, b),
    Divide: lambda op, a, b: divide(a, b),
    Negative: lambda op, a: negative(a),
    Abs: lambda op, a: (np.abs(a[0]), a[1]),
    Square: lambda op, a: multiply(a, a),
    Reciprocal: lambda op, a: _TREE["reciprocal"](a),
    Sqrt: lambda op, a: square_root(a),
    Maximum: lambda op, a, b: _extreme(lambda d: d >= 0)(a, b),
    Minimum: lambda op, a, b: _extreme(lambda d: d <= 0)(a, b),
    Where: lambda op, c, a, b: _select(c, a, b),
    Compare: _compare,
    Logical: _logical,
    Sign: lambda op, a: wide(np.sign(a[0])),
    Tanh: lambda op, a: _odd(np.tanh)(a),
    Sin: lambda op, a: _odd(np.sin)(a),
    Tan: lambda op, a: _odd(np.tan)(a),
    Arctan: lambda op, a: _odd(np.arctan)(a),
    Erf: lambda op, a: _erf(a),
    Sech: lambda op, a: sech(a),
    # the float's function is right past the range at both ends: cos(0) = 1, erfc(inf) = 0, ...
    **{t: lambda op, a: wide(op.perform(narrow(a))) for t in (Cos, Erfc, Sigmoid)},
    Cast: lambda op, a: _cast(op, a) if is_floating(op.dtype) else None,
    Exp: lambda op, a: exp(a),
    Expm1: lambda op, a: expm1(a),
    Log: lambda op, a: log(a),
    Log1p: lambda op, a: log1p(a),
    Sinh: lambda op, a: sinh(a),
    Cosh: lambda op, a: cosh(a),
    SechSquared: lambda op, a: sech_squared(a),
    Power: lambda op, a, b: power(a, b),
    XLogY: lambda op, a, b: _xlog(log)(a, b),
    XLog1PY: lambda op, a, b: _xlog(log1p)(a, b),
    Monomial: lambda op, *xs: evaluate(op.tree, xs, _TREE),
    MaskedGradient: lambda op, a, mask: a,  # (x itself; a late rule's where leaves them in a value's graph)
}

#: composites that act entry by entry without saying so (`Entrywise`)
_ENTRYWISE_COMPOSITES = (OverArgument, AffineQuotient, AffineProduct, MaskedGradient)


class _Refused(Exception):
    """The graph sums over a broadcast at these arguments' shapes: no entry stands alone."""


# -- the graph --------------------------------------------------------------------------------------------------
class WideRange:
    """The rescue of one compiled graph (`rescuer` builds it, for graphs it applies to)."""

    def __init__(self, graph: FunctionGraph, extents: frozenset[int]):
        self.graph = graph
        self.extents = extents
        self.floating = [i for i, v in enumerate(graph.outputs) if is_floating(v.dtype)]

    def __call__(self, values: Sequence[np.ndarray], results: list, scalar=np.float64, finite=math.isfinite) -> list:
        """`results`, with each inf or NaN entry of finite inputs evaluated again on wide numbers."""
        for i in self.floating:  # (a call on scalars costs microseconds: their test is math.isfinite's)
            r = results[i]
            if finite(r) if r.__class__ is scalar else np.isfinite(r).all():
                continue
            with np.errstate(all="ignore"):
                return self._rescued(values, results)
        return results

    def _rescued(self, values: Sequence[np.ndarray], results: Sequence) -> list:
        results = [np.asarray(r) for r in results]  # (JAX's arrays, brought over once)
        outputs = [results[i] for i in self.floating]
        size = np.size(outputs[0])
        # every operand and output one entry or `size` of them, all of one broadcast shape: no entry
        # of the result reads another (a gradient summed over a broadcast would)
        try:
            shape = np.broadcast_shapes(*(np.shape(a) for a in (*values, *outputs)))
        except ValueError:
            return results
        if math.prod(shape) != size or any(np.size(a) not in (1, size) for a in (*values, *outputs)):
            return results
        bad = functools.reduce(np.logical_or, (~np.isfinite(np.reshape(r, -1)) for r in outputs))
        for v in values:
            if is_floating(v.dtype):
                bad = bad & np.isfinite(np.reshape(v, -1))
        where = np.flatnonzero(bad)
        if where.size == 0:
            return results
        try:
            wides = self._evaluate(values, where, size)
        except _Refused:
            return results
        for i in self.floating:
            r, dtype = results[i], self.graph.outputs[i].dtype
            flat = np.reshape(r, -1)
            was = ~np.isfinite(flat[where])
            fixed = np.array(flat, copy=True)
            fixed[where[was]] = np.broadcast_to(np.reshape(narrow(wides[i], dtype), -1), where.shape)[was]
            results[i] = fixed.reshape(np.shape(r))
        return results

    def _evaluate(self, values: Sequence[np.ndarray], where: np.ndarray, size: int) -> list:
        """The outputs at the entries `where` (flat indices into arrays of `size` entries).

        Each variable's full shape is followed along: every value has `size` entries or one, and
        a layout op passes its operand on only where it moves no entry (a reduce_to onto as many
        entries, a broadcast of one entry).  Extents (and the masks the engine broadcasts to
        them) are computed whole, as the program did.
        """
        env: dict[int, Any] = {}  # the chosen entries: wide numbers, or arrays of other dtypes
        whole: dict[int, Any] = {}  # extents, as they are
        shapes: dict[int, tuple] = {}

        def chosen(x):
            if np.size(x) == 1:
                return x
            if np.size(x) != size:
                raise _Refused
            return np.reshape(x, -1)[where]

        def read_whole(v):
            return whole[v.id] if v.id in whole else np.asarray(v.data)  # an extent or input, or a constant

        def read(v):
            if v.id not in env:
                x = read_whole(v)
                shapes.setdefault(v.id, np.shape(x))
                x = chosen(x)
                env[v.id] = wide(x) if is_floating(np.asarray(x).dtype) else x
            return env[v.id]

        for v, x in zip(self.graph.inputs, values):
            whole[v.id], shapes[v.id] = x, np.shape(x)
            read(v)

        for node in self.graph.nodes:
            op, outs, inputs = node.op, node.outputs, node.inputs
            if isinstance(op, ShapeDim):
                source = inputs[0]
                full = shapes[source.id] if source.id in shapes else np.shape(read_whole(source))
                whole[outs[0].id] = np.int64(full[op.axis])
            elif outs[0].id in self.extents:
                whole[outs[0].id] = implementation(op)(*(read_whole(v) for v in inputs))
            elif isinstance(op, ReduceTo | BroadcastTo):
                target = tuple(int(read_whole(d)) for d in inputs[1:])
                x = read(inputs[0])
                if isinstance(op, ReduceTo) and math.prod(target) != math.prod(shapes[inputs[0].id]):
                    raise _Refused
                env[outs[0].id], shapes[outs[0].id] = x, target
            else:
                args = [read(v) for v in inputs]
                full = np.broadcast_shapes(*(shapes[v.id] for v in inputs))
                if math.prod(full) not in (1, size):
                    raise _Refused
                for out, r in zip(outs, _entrywise(op, node, args)):
                    env[out.id], shapes[out.id] = r, full
        return [read(v) for v in self.graph.outputs]


def _entrywise(op, node: Apply, args: list) -> tuple:
    """An entrywise node's results: wide where there is a rule (`WIDE`), else the op in its dtype
    on its operands rounded into it — NaN where an operand was not a float as it was."""
    rule = WIDE.get(type(op))
    if rule is not None:
        # (booleans are numbers too, but for a where's condition and a logical op's operands)
        keep = range(len(args)) if isinstance(op, Logical) else (0,) if isinstance(op, Where) else ()
        numbers = [a if isinstance(a, tuple) or i in keep else wide(a) for i, a in enumerate(args)]
        result = rule(op, *numbers)
        if result is not None:  # (an integer or boolean result, a where of them say, as its dtype)
            dtype = node.outputs[0].dtype
            return (result if is_floating(dtype) or not isinstance(result, tuple) else narrow(result, dtype),)
    floats = [narrow(a, v.dtype) if isinstance(a, tuple) else a for a, v in zip(args, node.inputs)]
    lost: Any = False
    for a, v in zip(args, node.inputs):
        if isinstance(a, tuple):
            lost = lost | ~_in_range(a, v.dtype)
    outs = implementation(op)(*floats)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return tuple(wide(np.where(lost, np.nan, r)) if is_floating(np.asarray(r).dtype) else np.asarray(r) for r in outs)


def rescuer(graph: FunctionGraph) -> WideRange | None:
    """The wide-range rescue of a graph that acts entry by entry, else None.

    Besides entrywise ops, the graph may hold the nodes that compute extents (`shape_dim` and
    the integer arithmetic on them, run as they are), and the layout ops that sum or broadcast
    to such extents: at each call, where they would sum over a broadcast, nothing is rescued.
    """
    if not any(is_floating(v.dtype) for v in graph.outputs):
        return None
    if any(v.dtype.kind == "c" for node in graph.nodes for v in (*node.inputs, *node.outputs)):
        return None  # (a complex number's range is its parts': not rescued)
    extents: set[int] = set()
    for node in graph.nodes:
        op, inputs = node.op, node.inputs
        if isinstance(op, ShapeDim) or (
            any(v.id in extents for v in inputs)
            and all(v.id in extents or _one_entry(v) for v in inputs)
            and not any(is_floating(v.dtype) for v in node.outputs)
        ):
            extents.update(v.id for v in node.outputs)
        elif isinstance(op, ReduceTo | BroadcastTo):
            if not all(v.id in extents or _one_entry(v) for v in inputs[1:]):
                return None
        elif isinstance(op, ExpandDims):
            if not _one_entry(inputs[0]):
                return None
        elif not isinstance(op, (Entrywise, *_ENTRYWISE_COMPOSITES)):
            return None
    if any(v.id in extents for v in graph.outputs):
        return None
    return WideRange(graph, frozenset(extents))


def _one_entry(v) -> bool:
    return isinstance(v, Constant) and np.size(v.data) == 1
