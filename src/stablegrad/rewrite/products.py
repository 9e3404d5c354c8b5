"""Products and quotients whose factors leave the float range while the answer does not (issue 17):

- the log of a product or quotient of factors that are never negative (exp, sigmoid, softmax,
  squares, abs, positive constants, ...) is the sum or difference of their logs where the
  written product under- or overflowed, and the written log elsewhere;
- `log(det(A))` is the log|det| of `slogdet`, kept NaN where det is negative;
- a factor times a `where` with a zero branch is the `where` of the product (PyTensor's
  `local_mul_switch_sink`): the zero does not meet an infinite factor;
- `exp(log(x))`, `expm1(log1p(x))` and `exp(log1p(x))` are x, x and 1 + x on their domain;
- a difference of shifted reciprocals `k/(x + a) - k/(x + b)` is one quotient, `k·(b - a)/((x + a)(x + b))`;
- powers of one positive constant base multiply by adding exponents (PyTensor's
  `local_mul_pow_to_pow_add`) where the written product under- or overflowed.
- late (`LATE_RULES`, after recognition): the log of a product or quotient of factors of any
  sign, where their signs agree; and a constant minus a quotient of affine forms in a shared
  term over a common numerator, `1 - (x - y)/(1 - y)` → `(1 - x)/(1 - y)`, and so its log.

Where the written formula is fine it is kept (as a `where` branch): the rules remove inf·0,
inf/inf and log(0) or log(inf) of a finite answer, and change no finite, accurate value.
They run in the STABILIZE phase after the other catalogue modules (whose more specific
patterns, such as `log(0.5·erfc(t))` → `log_ndtr`, win) and chain with them: the logs a
replacement takes (`log(sigmoid(a))`) are recognised in turn.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..graph.basic import Apply, Constant, Variable
from ..graph.types import is_floating
from ..ops import stable
from ..ops.base import astype
from ..ops.decompositions import Det, slogdet
from ..ops.elementwise import (
    Abs,
    Add,
    Divide,
    Multiply,
    Negative,
    Sqrt,
    Square,
    Subtract,
    Where,
    abs,
    equal,
    greater,
    greater_equal,
    isfinite,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    where,
)
from ..ops.math import Cosh, Erfc, Exp, Expm1, Log, Log1p, Power, log, log1p, power
from ..ops.partials import AffineProduct, AffineQuotient
from .branches import masked_where
from .engine import Kind, Phase, rewrite
from .partials import affine_form
from .patterns import LAYOUT, constant_value, fits, is_constant, owner, provably_positive, square_of, terms_with_signs

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION
#: how many factors of a product `_never_negative` looks through (linear, not a walk of the graph)
_DEPTH = 8


def _in_dtype(result: Variable, node: Apply) -> Variable:
    """result in the dtype of node's output (a float64 log of a constant beside a float32 formula, an
    integer or float32 factor of a float64 product)."""
    dtype = node.outputs[0].dtype
    return result if result.dtype == dtype else astype(result, dtype)


def _positive_constant(v: Variable) -> bool:
    """Whether v is a float or integer constant whose entries are all positive and finite."""
    if not isinstance(v, Constant) or v.data.size == 0 or v.data.dtype.kind not in "fiu":
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(v.data > 0) and np.all(np.isfinite(v.data)))


def _finite_constant(v: Variable) -> bool:
    if not isinstance(v, Constant) or v.data.dtype.kind not in "fiub":
        return False
    return bool(np.all(np.isfinite(v.data)))


def _never_negative(v: Variable, depth: int = _DEPTH) -> bool:
    """Whether v is ≥ 0 or NaN for every input: exp, softplus, sigmoid, softmax, a positive constant,
    |x|, √x, x², cosh, erfc, and products and quotients of those, also behind layout ops."""
    if depth == 0:
        return False
    if provably_positive(v) or _positive_constant(v) or square_of(v) is not None:
        return True
    node = v.owner
    if node is None:
        return False
    if isinstance(node.op, Abs | Sqrt | Square | Cosh | Erfc | stable.ExpOfSum):
        return True
    if isinstance(node.op, LAYOUT):
        return _never_negative(node.inputs[0], depth - 1)
    if isinstance(node.op, Multiply | Divide):
        return all(_never_negative(x, depth - 1) for x in node.inputs)
    return False


def _out_of_range(q: Variable) -> Variable:
    """Where q is 0, subnormal or +inf: a product of numbers that under- or overflowed (never where
    q is negative or NaN, where the written log is NaN and stays so)."""
    info = np.finfo(q.dtype)
    return logical_and(greater_equal(q, 0), logical_or(less(q, float(info.tiny)), greater(q, float(info.max))))


# -- the log of a product or quotient --------------------------------------------------------------------
def _logs_of_product(q: Variable, node: Apply, used: Variable) -> Variable | None:
    """log(a) ± log(b) for q = a·b or a/b whose factors allow it (see the rule below), 2·log|x|
    for q = x² (a square of any sign; x read as 1 where `used` is false, so that a square of 0
    sends no 0·inf back there), in node's dtype; None for any other q."""
    if not is_floating(q.dtype):
        return None
    root = square_of(q)
    if root is not None and is_floating(root.dtype):
        root = root if root.dtype == q.dtype else astype(root, q.dtype)  # (as the written square is taken)
        return _in_dtype(2 * log(abs(where(used, root, 1.0))), node)
    magnitude = owner(q, Abs)
    q_node = owner(magnitude.inputs[0] if magnitude is not None else q, Multiply, Divide)
    if q_node is None or not is_floating(q_node.outputs[0].dtype):
        return None
    a, b = q_node.inputs
    known = (_never_negative(a) and _never_negative(b)) or _positive_constant(a) or _positive_constant(b)
    if magnitude is None and not known:
        return None
    # (each factor in the product's dtype, as the written product takes it: a float32 factor of a
    # float64 product is not logged in float32)
    a, b = _in_dtype(a, q_node), _in_dtype(b, q_node)
    if magnitude is not None:  # |a·b| = |a|·|b|, whatever the signs
        a, b = abs(a), abs(b)
    return _in_dtype(log(a) + log(b) if isinstance(q_node.op, Multiply) else log(a) - log(b), node)


@rewrite(_S, _REC, Log)
def sum_of_logs_from_log_of_product(node):
    """log(a·b) → log(a) + log(b) and log(a/b) → log(a) - log(b) where a·b (a/b) is 0, subnormal or
    inf, the written log elsewhere; for a, b never negative (exp, sigmoid, softmax, |x|, x², √x,
    positive constants, and products of them) or one of them a positive constant (`log(1/x)`,
    `log(x/c)`); log|a·b| → log|a| + log|b| for any signs (GERG's `log|θ·T·τ|`); log(x·x) →
    2·log|x| for x of any sign (`log(sigma**2)` at sigma = 1e-200). A product of three factors is
    two rewrites.

    Written, the product leaves the float range before its log does: log(1/x) is inf at x = 1e-310
    (exactly 713.8), log(σ(a)·σ(b)) is -inf with a NaN gradient at a = b = -800 (exactly -1600), and so
    is log(softmax(x)[0]·softmax(x)[1]). Where the product is a normal number the written log is
    kept: it is the more accurate one there (log a + log b cancels where a ≈ 1/b). The domain is the
    written one: a negative or NaN product stays NaN (c/x at x = -0 is -inf, its log NaN), a genuine
    0 gives -inf and 0·inf NaN; where the sum of logs is NaN (a negative factor that underflowed to
    -0) the written log stays. Two factors of unknown sign must not fire (log(x·y) is a number where
    both are negative, the sum of logs NaN; and as log|x| + log|y| with a NaN where the signs differ
    it would hide `log(w/sum(w))` from logsumexp's weights rule, whose gradient at a zero weight
    is finite), nor one of unknown sign beside a factor that may be 0.
    """
    inner = node.inputs[0]
    if not is_floating(inner.dtype):
        return None
    out_of_range = _out_of_range(inner)
    parts = _logs_of_product(inner, node, out_of_range)
    if parts is None:
        return None
    # (a NaN sum of logs where the product is 0 is a negative factor of unknown sign that underflowed,
    # c·x at x = -1e-300, or c/x at x = -inf: the written -inf stays, as the log of -0)
    taken = logical_and(out_of_range, logical_not(isnan(parts)))
    # the written log reads a `where` that holds 1 where it is not taken: no log(0) in its pullback,
    # and a Log of a Where, which this rule does not match again
    written = log(where(taken, 1.0, inner))
    return fits(where(taken, parts, written), node)


@rewrite(Phase.GRADIENT, _REC, Log, stable.XLogY)
def sum_of_logs_of_magnitudes_from_log_of_product(node):
    """log(a·b) → log|a| + log|b| and log(a/b) → log|a| - log|b| for factors of any sign, where the
    written product or quotient is 0, subnormal or inf and the factors' signs agree (so the product
    is positive); the written log elsewhere. Likewise `xlogy(x, a/b)` (`x·log(x/y)` once recognised),
    as xlogy(x, |a|) - xlogy(x, |b|). One of the LATE_RULES: it runs after recognition has seen the
    whole graph.

    Written, `x·log(x/y)` is -inf at x = 3e-307, y = 7e65 (exactly -2.8e-304), and its partial in x
    inf; likewise where both are negative. Where the signs differ the written log is NaN and stays
    NaN, and a factor 0 gives -inf. Early, as a recognition rule, it would take `log(w/sum(w))` from
    logsumexp's weights rule (which `sum_of_logs_from_log_of_product` leaves alone for this reason):
    a weight of unknown sign is read there too, with a finite gradient at a zero weight.
    """
    *scale, inner = node.inputs  # (xlogy's x, then the product)
    found = _two_factors(inner)
    if found is None or not is_floating(inner.dtype):
        return None
    q_node, a, b, divided = found

    def log_of(v: Variable) -> Variable:
        return stable.xlogy(scale[0], v) if scale else log(v)

    a, b = _in_dtype(a, q_node), _in_dtype(b, q_node)
    agree = logical_or(logical_and(greater(a, 0), greater(b, 0)), logical_and(less(a, 0), less(b, 0)))
    taken = logical_and(_out_of_range(inner), agree)
    # (each factor read as 1 where its log is not taken: no log(0) in the pullback of the branch not
    # taken, which no masking rule runs after this one to guard)
    a, b = abs(where(taken, a, 1.0)), abs(where(taken, b, 1.0))
    parts = log_of(a) - log_of(b) if divided else log_of(a) + log_of(b)
    written = log_of(where(taken, 1.0, inner))  # (the log of a `where`, which this rule does not match again)
    return fits(where(taken, _in_dtype(parts, node), written), node)


def _two_factors(v: Variable) -> tuple[Apply, Variable, Variable, bool] | None:
    """(v's node, a, b, whether divided) for v = a·b or a/b of floats, also where the late phase's
    gradient rules made it an affine product or quotient (`rewrite/partials.py`) first."""
    node = owner(v, Multiply, Divide, AffineProduct, AffineQuotient)
    if node is None or not all(is_floating(x.dtype) for x in node.inputs[:2]):
        return None
    return node, node.inputs[0], node.inputs[1], isinstance(node.op, Divide | AffineQuotient)


def _difference_of_forms(c: float, a: Variable, b: Variable) -> Variable | float | None:
    """c·b - a for affine forms a and b that share a term whose coefficients cancel in it, summed
    term by term (the cancelled terms left out; a float where only the constant is left); None
    where there is none, or where a coefficient would be rounded."""
    form_a, form_b = affine_form(a), affine_form(b)
    if form_a is None or form_b is None:
        return None
    (terms_a, constant_a), (terms_b, constant_b) = form_a, form_b
    shared = terms_a.keys() & terms_b.keys()
    if not any(c * terms_b[k][1] == terms_a[k][1] for k in shared):
        return None
    total: Variable | float = 0.0
    for key in terms_a.keys() | terms_b.keys():
        u = (terms_a.get(key) or terms_b[key])[0]
        alpha, beta = terms_a.get(key, (u, 0.0))[1], terms_b.get(key, (u, 0.0))[1]
        k = Fraction(c) * Fraction(beta) - Fraction(alpha)
        if k != Fraction(float(k)):
            return None
        if k != 0:
            total = total + (u if k == 1 else -u if k == -1 else float(k) * u)
    rest = Fraction(c) * Fraction(constant_b) - Fraction(constant_a)
    if rest != Fraction(float(rest)) or (isinstance(total, float) and rest == 0):
        return None  # (a rounded constant, or c - a/b that is 0 wherever it is finite)
    return total + float(rest) if rest != 0 else total


@rewrite(Phase.GRADIENT, _REC, Subtract)
def common_numerator_from_constant_minus_quotient(node):
    """c - a/b → (c·b - a)/b for affine forms a and b in shared terms whose coefficients cancel
    in c·b - a, which is summed term by term: `1 - (x - y)/(1 - y)` → `(1 - x)/(1 - y)`. Also
    a/b - c, its negation. Where the written quotient or the new one is not finite, as written.
    One of the LATE_RULES, so that `log(1 - a/b)` is log1p's first (see the rule below).

    Written, the quotient nears c where the shared term is large, and the difference keeps only
    its last digits: at y = -1e16, x = 3e-125 it is 0, where the answer is 1e-16 (so that
    `log(1 - (x - y)/(1 - y))` is -inf, exactly -36.8). The new numerator has no such difference.
    """
    for first, second, sign in ((*node.inputs, 1.0), (*node.inputs[::-1], -1.0)):
        c, quotient = constant_value(first), _two_factors(second)
        if c is None or quotient is None or not quotient[3] or not math.isfinite(c):
            continue
        _, a, b, _ = quotient
        numerator = _difference_of_forms(c, a, b)
        if numerator is None:
            continue
        combined = numerator / b
        taken = logical_and(isfinite(second), isfinite(combined))
        written = first - where(taken, c, second) if sign > 0 else where(taken, c, second) - first
        return fits(masked_where(taken, combined if sign > 0 else -combined, written), node)
    return None


@rewrite(Phase.GRADIENT, _REC, Log1p)
def log_of_common_numerator_from_log1p_of_quotient(node):
    """log1p(-a/b) → log((b - a)/b) and log1p(a/b) → log((b + a)/b) for affine forms a and b in
    shared terms whose coefficients cancel in b ∓ a, where the quotient is at least 1/2 from 0
    (and finite, and so is the new one); log1p as written elsewhere, where it is the accurate one.
    One of the LATE_RULES: `log(1 - a/b)` is log1p's by then.

    Written, -a/b nears -1 where the shared term is large, and 1 - a/b keeps only its last digits:
    `log(1 - (x - y)/(1 - y))` at y = -1e16, x = 3e-125 is -inf, exactly -36.8.
    """
    inner = node.inputs[0]
    negation = owner(inner, Negative)
    quotient = _two_factors(negation.inputs[0] if negation is not None else inner)
    if quotient is None or not quotient[3]:
        return None
    _, a, b, _ = quotient
    numerator = _difference_of_forms(1.0 if negation is not None else -1.0, a, b)
    if numerator is None:
        return None
    combined = (numerator if negation is not None else -numerator) / b
    taken = logical_and(logical_and(isfinite(inner), isfinite(combined)), greater_equal(abs(inner), 0.5))
    written = log1p(where(taken, 0.0, inner))  # (a Log1p of a Where, which this rule does not match again)
    return fits(masked_where(taken, log(where(taken, combined, 1.0)), written), node)


@rewrite(_S, _REC, Log1p)
def sum_of_logs_from_log1p_of_square(node):
    """log1p(x²·c) and log1p(x²/c), c a positive constant (or none), → 2·log|x| ± log(c) where the
    square overflowed to inf, the written log1p elsewhere: log1p(x²/ν) of a Student-t or Cauchy
    log-density is inf past |x| = 1.3e154 (exactly 2·log|x| - log ν, to far below an ulp).

    Below overflow the written log1p is kept (it is exact near 0, where a log of the square is
    not); so is a NaN.  x is read as 1 where the rule does not take its log, so that a square of
    0 sends no 0·inf back (log1p(u²/ν) of a u that is itself such a log1p, at 0).
    """
    inner = node.inputs[0]
    if not is_floating(inner.dtype):
        return None
    root, scale = square_of(inner), None
    q_node = owner(inner, Multiply, Divide) if root is None else None
    if q_node is not None:
        for i in (0, 1) if isinstance(q_node.op, Multiply) else (0,):
            if square_of(q_node.inputs[i]) is not None and _positive_constant(q_node.inputs[1 - i]):
                root, scale = square_of(q_node.inputs[i]), q_node.inputs[1 - i]
    if root is None or not is_floating(root.dtype):
        return None
    overflowed = equal(inner, np.inf)
    root = root if root.dtype == inner.dtype else astype(root, inner.dtype)  # (as the written square is taken)
    parts = 2 * log(abs(where(overflowed, root, 1.0)))
    if scale is not None:
        scale = _in_dtype(log(_in_dtype(scale, q_node)), node)
        parts = parts - scale if isinstance(q_node.op, Divide) else parts + scale
    written = log1p(where(overflowed, 0.0, inner))  # (a Log1p of a Where: not matched again)
    return fits(where(overflowed, _in_dtype(parts, node), written), node)


# -- log det ---------------------------------------------------------------------------------------------
@rewrite(_S, _REC, Log)
def slogdet_from_log_of_det(node):
    """log(det(A)) → log|det A| from slogdet(A) where det A > 0, -inf where it is 0, NaN where it is
    negative (also for stacks of matrices).

    Written, det overflows or underflows long before its log does: log(det(1e200·A)) is inf for a
    2×2 A (exactly 921.7 + log det A) with a NaN gradient. The gradient of slogdet is solve(Aᵀ, ḡ·I),
    as det's own pullback, with no inverse formed. NumPy computes det itself as sign·exp(log|det|),
    so the written log is never the more accurate one (it carries exp's rounding once more).
    """
    d = owner(node.inputs[0], Det)
    if d is None:
        return None
    sign, logabsdet = slogdet(d.inputs[0])
    nan, minus_inf = (np.asarray(v, logabsdet.dtype) for v in (np.nan, -np.inf))
    singular_or_negative = where(equal(sign, 0), minus_inf, nan)
    return fits(_in_dtype(where(greater(sign, 0), logabsdet, singular_or_negative), node), node)


# -- a zero branch sunk into a product -------------------------------------------------------------------
def _zero_branch(v: Variable) -> tuple[Variable, Variable, bool] | None:
    """(c, f, zero_when) for v = where(c, 0, f) (zero_when True) or where(c, f, 0) (False)."""
    w = owner(v, Where)
    if w is None:
        return None
    c, x, y = w.inputs
    if is_constant(x, 0.0) and not is_constant(y, 0.0):
        return c, y, True
    if is_constant(y, 0.0) and not is_constant(x, 0.0):
        return c, x, False
    return None


@rewrite(_S, _REC, Multiply, Divide)
def where_from_product_with_zero_branch(node):
    """A·where(c, 0, f) → where(c, 0, A·f) (either order, and where(c, f, 0)); where(c, 0, f)/B →
    where(c, 0, f/B); the 0 stays NaN where A or B is NaN, and where B is 0.

    Written, the zero meets the other factor: exp(x)·where(x > 700, 0, 1) is inf·0 = NaN at x = 800,
    where the formula says 0, and its gradient is NaN wherever the zero branch is taken and A' is
    inf. Sunk, A·f is a branch of the where, whose gradient the where masks. A NaN A (log(-1)) is a
    domain error and stays one; so is 0/0 (a genuine zero B cannot be told from one that
    underflowed, so the quotient keeps its NaN there and only its gradient changes). The result
    keeps the written shape (the condition may broadcast the product wider) and dtype.
    """
    dtype = node.outputs[0].dtype
    if not is_floating(dtype):
        return None
    first, second = node.inputs
    if isinstance(node.op, Multiply):
        candidates = [(first, second), (second, first)]
    else:
        candidates = [(second, first)]  # only the numerator's where: A / where(c, 0, f) is A/0 as meant
    for other, w in candidates:
        found = _zero_branch(w)
        if found is None or _finite_constant(other):
            continue  # (a finite constant times 0 is 0 as written)
        c, f, zero_when = found
        # the product in the written one's dtype (a float32 f beside a float64 zero is multiplied in float64)
        other, f = _in_dtype(other, node), _in_dtype(f, node)
        nan, zero = np.asarray(np.nan, dtype), np.asarray(0.0, dtype)
        undefined = isnan(other)
        if isinstance(node.op, Divide):
            undefined = logical_or(undefined, equal(other, 0))
            product = f / other
        else:
            product = other * f if w is second else f * other
        zero_or_nan = where(undefined, nan, zero)
        sunk = where(c, zero_or_nan, product) if zero_when else where(c, product, zero_or_nan)
        return fits(_in_dtype(sunk, node), node)
    return None


# -- exp of a log ----------------------------------------------------------------------------------------
@rewrite(_S, _REC, Exp, Expm1)
def identity_from_exp_of_log(node):
    """exp(log(x)) → x for x ≥ 0; expm1(log1p(x)) → x and exp(log1p(x)) → 1 + x for x ≥ -1; NaN
    elsewhere (value and gradient), as written.

    Written, exp carries log's rounding |log x| times over: exp(log(1e300)) is about 300 ulps
    off (exp(log(x)) = x·(1 + δ·log x) for log's rounding δ), and the gradient exp(log x)/x is
    0·inf = NaN at x = 0. The edges are the written ones: exp(log 0) = 0, exp(log inf) = inf,
    expm1(log1p(-1)) = -1, NaN stays NaN.
    """
    inner = node.inputs[0]
    if not is_floating(node.outputs[0].dtype):
        return None
    if isinstance(node.op, Exp):
        lg, lp = owner(inner, Log), owner(inner, Log1p)
    else:
        lg, lp = None, owner(inner, Log1p)
    if lg is None and lp is None:
        return None
    x = _in_dtype((lg if lg is not None else lp).inputs[0], node)  # type: ignore[union-attr]
    dtype = node.outputs[0].dtype
    one, nan = np.asarray(1.0, dtype), np.asarray(np.nan, dtype)
    value = x if lg is not None or isinstance(node.op, Expm1) else 1.0 + x
    bound = 0.0 if lg is not None else -1.0
    # NaN below the domain through a factor, so that the gradient is NaN there too
    return fits(value * where(greater_equal(x, bound), one, nan), node)


# -- powers of one base ----------------------------------------------------------------------------------
def _power_of_constant(v: Variable) -> tuple[float, Variable, Variable] | None:
    """(c, base, a) for v = c**a with a positive finite constant base c whose entries are all equal."""
    p = owner(v, Power)
    if p is None or not _positive_constant(p.inputs[0]):
        return None
    data = p.inputs[0].data  # type: ignore[attr-defined]
    first = data.reshape(-1)[0]
    return (float(first), p.inputs[0], p.inputs[1]) if np.all(data == first) else None


def _normal(v: Variable) -> Variable:
    info = np.finfo(v.dtype)
    return logical_and(greater_equal(v, float(info.tiny)), less_equal(v, float(info.max)))


@rewrite(_S, _REC, Multiply, Divide)
def power_of_sum_from_product_of_powers(node):
    """c**a · c**b → c**(a + b) and c**a / c**b → c**(a - b) for one positive constant base c, where
    a factor or the written product is 0, subnormal or inf; the written product elsewhere.

    Written, 10**x · 10**(-x) is inf·0 = NaN at x = 400 (exactly 1), and 10**(-200)·10**(-200)/10**(-390)
    is 0/0. Where both factors and the product are normal numbers the written product is kept: it
    is the more accurate one (c**(a + b) carries the rounding of a + b times |(a + b)·ln c|, 300
    ulps at 10**300.1). A variable or negative base must not fire: (-2)**a · (-2)**b is a
    number at integer a, b where (-2)**(a + b) need not be, and x**a · x**b differs at x = 0.
    """
    if not is_floating(node.outputs[0].dtype):
        return None
    left, right = (_power_of_constant(v) for v in node.inputs)
    if left is None or right is None or left[0] != right[0]:
        return None
    (_, base, a), (_, _, b) = left, right
    pa, pb = node.inputs
    product = isinstance(node.op, Multiply)
    exponent = a + b if product else a - b
    in_range = logical_and(_normal(pa), _normal(pb))
    # the written product, spelled through a where (a Multiply of a Where, which this rule does not
    # match again); its factors hold 1 where it is not taken, so its pullback meets no inf
    kept = where(in_range, pa, 1.0)
    written = kept * pb if product else kept / pb
    in_range = logical_and(in_range, _normal(written))
    return fits(_in_dtype(where(in_range, written, power(base, exponent)), node), node)


def _shifted_reciprocal(t: Variable) -> tuple[float, Variable, float, Variable] | None:
    """(k, x, c, d) for t = k / d with d = x + c (`x + c`, `c + x`, `x - c`, or x itself, c = 0):
    k and c constants."""
    quotient = owner(t, Divide)
    if quotient is None:
        return None
    k, d = constant_value(quotient.inputs[0]), quotient.inputs[1]
    if k is None or not is_floating(d.dtype):
        return None
    total, difference = owner(d, Add), owner(d, Subtract)
    if total is not None:
        for x, c in (total.inputs, total.inputs[::-1]):
            if (shift := constant_value(c)) is not None and constant_value(x) is None:
                return k, x, shift, d
    if difference is not None and (shift := constant_value(difference.inputs[1])) is not None:
        return k, difference.inputs[0], -shift, d
    return k, d, 0.0, d


#: the most shifted reciprocals a sum may have for their common denominator to be taken
MAX_RECIPROCALS = 4


@rewrite(_S, _REC, Add, Subtract)
def quotient_from_sum_of_shifted_reciprocals(node):
    """Σ ±kᵢ/(x + aᵢ) over 2 to 4 terms → P(x)/(x + a₁)/…/(x + aₙ) with P = Σ ±kᵢ·Π_{j≠i}(x + aⱼ),
    where P's leading coefficients cancel (its degree is below n - 1) and all of them are exact in
    the dtype: `k/(x + a) - k/(x + b)` → `k·(b - a)/(x + a)/(x + b)` (so `1/(x + 1) - 1/x`), and
    `1/(x + 1) - 2/x + 1/(x - 1)` → `2/(x + 1)/x/(x - 1)`.

    Written, the quotients agree in all but their last digits once |x| is far above the shifts,
    and their sum keeps only those (1/(x + 1) - 1/x at x = 1e8: 7 digits; the three-term sum at
    1e8, none). P, the written denominators' common numerator, has no such difference to
    cancel, nor has its derivative where |x| is large. Near a root of P (where the sum passes
    through 0) it still cancels, as the written one does. At x = -aᵢ both are ±inf, with the
    written sign. The shifts must differ, and x be the same node in every term.
    """
    terms = terms_with_signs(node.outputs[0], MAX_RECIPROCALS)
    if terms is None or len(terms) < 2:
        return None
    parsed = [(sign, _shifted_reciprocal(t)) for sign, t in terms]
    if any(p is None for _, p in parsed):
        return None
    x = parsed[0][1][1]  # type: ignore[index]
    shifts = [p[2] for _, p in parsed]  # type: ignore[index]
    if any(p[1] is not x for _, p in parsed) or len(set(shifts)) < len(shifts):  # type: ignore[index]
        return None
    numerator = _common_numerator([(Fraction(sign) * Fraction(p[0]), Fraction(p[2])) for sign, p in parsed])  # type: ignore[index]
    if len(numerator) >= len(parsed) or not any(numerator):
        return None  # (no leading part cancels: the written sum loses nothing at large |x|)
    dtype = node.outputs[0].dtype
    coefficients = [np.asarray(float(c), dtype) for c in numerator]
    if any(Fraction(float(c)) != exact or not np.isfinite(c) for c, exact in zip(coefficients, numerator)):
        return None  # (a coefficient would be rounded: not the written formula's exact constants)
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = result * x + c
    for _, p in parsed:
        result = result / p[3]  # type: ignore[index]
    return fits(result, node)


def _common_numerator(terms: list[tuple[Fraction, Fraction]]) -> list[Fraction]:
    """The coefficients (constant first) of Σ kᵢ·Π_{j≠i}(x + aⱼ) for terms (kᵢ, aᵢ), trailing zeros dropped."""
    total = [Fraction(0)] * len(terms)
    for i, (k, _) in enumerate(terms):
        poly = [k]
        for j, (_, a) in enumerate(terms):
            if j != i:
                poly = _times_shifted(poly, a)
        for m, c in enumerate(poly):
            total[m] += c
    while len(total) > 1 and total[-1] == 0:
        total.pop()
    return total


def _times_shifted(poly: list[Fraction], a: Fraction) -> list[Fraction]:
    """The coefficients of poly(x)·(x + a) (constant first)."""
    result = [Fraction(0)] * (len(poly) + 1)
    for m, c in enumerate(poly):
        result[m] += a * c
        result[m + 1] += c
    return result


RULES = (
    sum_of_logs_from_log_of_product,
    quotient_from_sum_of_shifted_reciprocals,
    sum_of_logs_from_log1p_of_square,
    slogdet_from_log_of_det,
    where_from_product_with_zero_branch,
    identity_from_exp_of_log,
    power_of_sum_from_product_of_powers,
)
#: run after recognition, with the monomials (GRADIENT and RANGE phases)
LATE_RULES = (
    sum_of_logs_of_magnitudes_from_log_of_product,
    common_numerator_from_constant_minus_quotient,
    log_of_common_numerator_from_log1p_of_quotient,
)
