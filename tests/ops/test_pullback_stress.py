"""Every stable op's and elementwise op's gradient and Hessian-vector product at stress points,
against mpmath.

The reference is the *naive* formula (`log(sum(exp(x)))`, `log(erfc(x))`, ...) evaluated
by the mpmath evaluator with hundreds of digits, where it is exact, and differentiated by
central differences (first order) and mixed second differences (the Hessian along a
direction) with a step 1e-40 below every scale of the point: exact far beyond float64.  The stress points are where pullbacks
break: ties at 1e16, values past the overflow threshold, tiny magnitudes, both signs
far apart, and float32.  Accuracy is normwise: each entry within a few ulps of the
scale of the terms it sums (a softmax gradient that cancels to 1e-18 is held to the rounding
of its O(1) terms, as any formula that sums them is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.audit.mpmath_eval import evaluate, to_mp

from .helpers import BACKEND

mpmath = pytest.importorskip("mpmath")

DIRECTION = np.array([1.0, -0.5, 0.25])
WEIGHTS = np.array([0.75, 1.25, -0.5])  # the cost is sum(weights * op(x)), so no gradient is trivially 0


@dataclass(frozen=True)
class Spec:
    name: str
    stable: Callable  # x (3,) -> a tensor
    naive: Callable  # the same function written naively, exact when evaluated in mpmath
    points: tuple  # float64 stress points
    points32: tuple  # float32 stress points
    #: the gradient's tolerance in ulps of its scale; logcumsumexp's pullback sums in the log
    #: domain, exp(x_j + reversed logcumsumexp(log g - out)), whose exponent cancels |x_j - max x|
    #: (27 ulps at [-40, 0, 40]: the early prefix has the whole weight of its own output)
    ulps: int = 16
    #: a math-library primitive (exp, sinh, ...): its values, and so its derivatives, are the
    #: backend's own; XLA's exp2, sinh and cosh are ~250 ulps off near the overflow threshold
    primitive: bool = False


def _pairs(op):
    """op applied to the neighbouring pairs of x: both operand positions get a gradient."""
    return lambda x: op(x[:2], x[1:])


def _lse(x):
    return sg.log(sg.sum(sg.exp(x)))


LSE_POINTS = ([1e16, 1e16, 1e16], [1e16, 1e16, 0.0], [700.0, 710.0, -800.0], [1e-300, -1e-300, 0.0], [-40.0, 0.0, 40.0])
LSE_POINTS32 = ([1e3, 1e3, 1e3], [88.0, 90.0, -100.0], [1e-30, -1e-30, 0.0], [-20.0, 0.0, 20.0])
LINE = ([-1e3, 0.0, 1e3], [-40.0, 1e-300, 40.0], [-745.0, -37.0, 710.0], [-1e-20, 1e-20, 0.5])
LINE32 = ([-1e2, 0.0, 1e2], [-17.0, 1e-30, 17.0], [-104.0, -88.0, 88.0])
B = np.array([0.5, 2.0, 1e-3])
LABELS = np.array([0.2, 0.3, 0.5])

SPECS = [
    Spec("logsumexp", sg.logsumexp, _lse, LSE_POINTS, LSE_POINTS32),
    Spec(
        "weighted logsumexp",
        lambda x: sg.logsumexp(x, b=B),
        lambda x: sg.log(sg.sum(B * sg.exp(x))),
        LSE_POINTS,
        LSE_POINTS32,
    ),
    Spec("logmeanexp", sg.logmeanexp, lambda x: sg.log(sg.mean(sg.exp(x))), LSE_POINTS, LSE_POINTS32),
    Spec(
        "logcumsumexp",
        sg.logcumsumexp,
        lambda x: sg.stack([_lse(x[:k]) for k in (1, 2, 3)]),
        LSE_POINTS,
        LSE_POINTS32,
        ulps=64,
    ),
    Spec("softmax", sg.softmax, lambda x: sg.exp(x) / sg.sum(sg.exp(x)), LSE_POINTS, LSE_POINTS32),
    Spec("log_softmax", sg.log_softmax, lambda x: x - _lse(x), LSE_POINTS, LSE_POINTS32),
    Spec(
        "softmax_cross_entropy",
        lambda x: sg.softmax_cross_entropy(x, LABELS),
        lambda x: -sg.sum(LABELS * (x - _lse(x))),
        LSE_POINTS,
        LSE_POINTS32,
    ),
    Spec(
        "logaddexp", _pairs(sg.logaddexp), _pairs(lambda a, b: sg.log(sg.exp(a) + sg.exp(b))), LSE_POINTS, LSE_POINTS32
    ),
    Spec(
        "logdiffexp",
        _pairs(sg.logdiffexp),
        _pairs(lambda a, b: sg.log(sg.exp(a) - sg.exp(b))),
        ([1e16, 1e16 - 4, 1e16 - 8], [1e-300, 0.0, -1e-300], [710.0, 700.0, -800.0], [40.0, 1e-20, -40.0]),
        ([1e3, 1e3 - 0.25, 1e3 - 0.5], [88.0, 80.0, -100.0], [1e-30, 0.0, -1e-30]),
    ),
    Spec(
        "log1mexp",
        sg.log1mexp,
        lambda x: sg.log(1.0 - sg.exp(x)),
        ([-1e-300, -1e3, -0.693], [-1e16, -40.0, -1e-20]),
        ([-1e-30, -1e2, -0.693], [-1e6, -17.0, -1e-7]),
    ),
    Spec("softplus", sg.softplus, lambda x: sg.log(1.0 + sg.exp(x)), LINE, LINE32),
    Spec("sigmoid", sg.sigmoid, lambda x: 1.0 / (1.0 + sg.exp(-x)), LINE, LINE32),
    Spec("log_sigmoid", sg.log_sigmoid, lambda x: -sg.log(1.0 + sg.exp(-x)), LINE, LINE32),
    Spec(
        "logit",
        sg.logit,
        lambda p: sg.log(p / (1.0 - p)),
        ([1e-300, 0.5, 1 - 2**-53], [1e-20, 0.25, 0.999999]),
        ([1e-30, 0.5, 1 - 2**-24], [1e-7, 0.25, 0.999]),
    ),
    Spec(
        "xlogy",
        _pairs(sg.xlogy),
        _pairs(lambda x, y: x * sg.log(y)),
        ([0.0, 1e-300, 1e300], [1e16, 1.0, 1e-20]),
        ([0.0, 1e-30, 1e30], [1e6, 1.0, 1e-20]),
    ),
    Spec(
        "xlog1py",
        _pairs(sg.xlog1py),
        _pairs(lambda x, y: x * sg.log1p(y)),
        ([0.0, 1e-300, 1e300], [1e16, -1 + 2**-52, 1e-20]),
        ([0.0, 1e-30, 1e30], [1e6, -1 + 2**-23, 1e-20]),
    ),
    Spec(
        "log_erfc",
        sg.log_erfc,
        lambda x: sg.log(sg.erfc(x)),
        ([-30.0, 0.0, 30.0], [1e-300, 1e3, -5.0], [26.5, 1e8, -1e-20]),
        ([-10.0, 0.0, 10.0], [1e-30, 1e3, -5.0], [9.5, 1e4, -1e-7]),
    ),
    Spec(
        "exp_of_sum",
        _pairs(sg.ops.stable.exp_of_sum),
        _pairs(lambda a, b: sg.exp(a + b)),
        ([800.0, -800.0, 1e-300], [700.0, 9.0, -1e3], [-40.0, 40.0, 0.5]),
        ([100.0, -100.0, 1e-30], [80.0, 7.0, -1e2]),
    ),
]


def _plain(name: str, op: Callable, points: tuple, points32: tuple) -> Spec:
    """An ordinary elementwise op: its own formula is the reference (the evaluator computes it exactly)."""
    return Spec(name, op, op, points, points32, primitive=True)


# The elementwise ops' pullbacks at huge, tiny and pole-adjacent inputs: each entry is its
# own scale here (elementwise), so these are relative-accuracy checks.
SPECS += [
    _plain("exp", sg.exp, ([-745.0, 1e-300, 709.7], [-40.0, 0.5, 40.0]), ([-103.0, 1e-30, 88.7],)),
    _plain("exp2", sg.exp2, ([-1074.0, 1e-300, 1023.9],), ([-149.0, 1e-30, 127.9],)),
    _plain("expm1", sg.expm1, ([-1e-300, 1e-20, 709.0], [-40.0, -1e-8, 40.0]), ([-1e-30, 1e-20, 88.0],)),
    _plain("log", sg.log, ([1e-300, 1.0 + 2**-52, 1e300], [1e-310, 2.0, 1e16]), ([1e-30, 1.0 + 2**-23, 1e30],)),
    _plain("log2", sg.log2, ([1e-300, 1.0 + 2**-52, 1e300],), ([1e-30, 1.0 + 2**-23, 1e30],)),
    _plain("log10", sg.log10, ([1e-300, 1.0 + 2**-52, 1e300],), ([1e-30, 1.0 + 2**-23, 1e30],)),
    _plain("log1p", sg.log1p, ([-1 + 2**-53, 1e-300, 1e300], [-0.5, 1e-20, 40.0]), ([-1 + 2**-24, 1e-30, 1e30],)),
    _plain("sqrt", sg.sqrt, ([1e-300, 2.0, 1e300], [1e-310, 0.5, 1e16]), ([1e-30, 2.0, 1e30],)),
    _plain("sin", sg.sin, ([1e-300, 1e16, np.pi], [1e5, -2.0, 0.5]), ([1e-30, 1e5, np.pi],)),
    _plain("cos", sg.cos, ([1e-300, 1e16, np.pi / 2], [1e5, -2.0, 0.5]), ([1e-30, 1e5, np.pi / 2],)),
    _plain("tan", sg.tan, ([np.pi / 2, 1e-300, -1.0], [1e5, -2.0, 0.5]), ([np.pi / 2, 1e-30, -1.0],)),
    _plain("tanh", sg.tanh, ([-20.0, 1e-300, 20.0], [-400.0, 0.5, 400.0]), ([-9.0, 1e-30, 9.0],)),
    _plain("sinh", sg.sinh, ([-710.0, 1e-300, 700.0], [-40.0, 0.5, 40.0]), ([-89.0, 1e-30, 88.0],)),
    _plain("cosh", sg.cosh, ([-710.0, 1e-300, 700.0], [-40.0, 0.5, 40.0]), ([-89.0, 1e-30, 88.0],)),
    _plain("arctan", sg.arctan, ([1e150, 1e-300, -1e100], [-3.0, 0.5, 1e8]), ([1e18, 1e-30, -1e10],)),
    _plain("erf", sg.erf, ([-30.0, 1e-300, 30.0], [-5.0, 0.5, 5.0]), ([-10.0, 1e-30, 10.0],)),
    _plain("erfc", sg.erfc, ([-30.0, 1e-300, 26.0], [-5.0, 0.5, 5.0]), ([-10.0, 1e-30, 9.0],)),
    _plain("erfcx", sg.ops.math.erfcx, ([-26.0, 1e-300, 1e8], [-5.0, 0.5, 1e3]), ([-9.0, 1e-30, 1e4],)),
    _plain("gammaln", sg.gammaln, ([1e-300, 1e300, 0.5], [-2.5, 3.0, 1e5]), ([1e-30, 1e30, 0.5],)),
    _plain("reciprocal", sg.reciprocal, ([1e-300, -1e300, 3.0], [-1e-150, 1e150, -0.5]), ([1e-30, -1e30, 3.0],)),
    _plain("square", sg.square, ([1e154, 1e-300, -3.0], [-1e200, 0.5, 1e-160]), ([1e19, 1e-30, -3.0],)),
    _plain("power 3.5", lambda x: x**3.5, ([1e-300, 1e80, 2.0], [1e-100, 0.5, 1e20]), ([1e-30, 1e10, 2.0],)),
    _plain("power -2.5", lambda x: x**-2.5, ([1e-300, 1e80, 2.0], [1e-100, 0.5, 1e20]), ([1e-12, 1e10, 2.0],)),
    _plain("abs", sg.abs, ([-1e300, 1e-300, -2.0],), ([-1e30, 1e-30, -2.0],)),
]
# XLA on CPU flushes subnormal numbers to zero: a subnormal input is 0 there, a point of its own
FLUSHES = BACKEND == "jax"
LIBRARY_ULPS = 32 if BACKEND == "jax" else 1  # how much looser a primitive's own accuracy is (XLA)


def _has_subnormals(point, dtype) -> bool:
    values = np.abs(np.array(point, dtype=dtype))
    return bool(np.any((values > 0) & (values < np.finfo(dtype).tiny)))


CASES = [
    (s, np.array(p), t)
    for s in SPECS
    for points, t in ((s.points, np.float64), (s.points32, np.float32))
    for p in points
    if not (FLUSHES and _has_subnormals(p, t))
]
IDS = [f"{s.name}-{t.__name__}-{p.tolist()}" for s, p, t in CASES]


def _exact_outputs(spec: Spec, dps: int) -> Callable:
    """The naive formula as an mpmath function of an object array x (its outputs, flattened)."""
    x = sg.tensor("x", shape=(3,))
    out = sg.ravel(spec.naive(x))

    def at(values):
        (value,) = evaluate([x], [out], [values], dps=dps)
        return np.asarray(value, dtype=object)

    return at


def _step(x: np.ndarray):
    """A difference step far below every scale of x (its entries and their gaps), with the digits
    to resolve it: (step, decimal digits)."""
    scales = [abs(v) for v in x] + [abs(a - b) for a in x for b in x]
    smallest = min([1.0] + [float(v) for v in scales if v != 0])
    step = mpmath.mpf(smallest) * mpmath.mpf(10) ** -40
    # second differences are t² times the value: twice the digits that resolve t, and a margin
    digits = 60 + 2 * int(mpmath.ceil(mpmath.log10(max(float(np.max(np.abs(x))), 1.0) / step)))
    return step, digits


def _exact_derivatives(spec: Spec, x: np.ndarray, weights: np.ndarray):
    """For the cost sum(weights * naive(x)), by high-precision differences: the gradient, the
    Hessian times DIRECTION, and the scale of each (Σ_i |w_i · d out_i|: what the terms that a
    pullback adds are of size, where their sum may be far smaller)."""
    t, dps = _step(x)
    f = _exact_outputs(spec, dps)
    jacobian, curvature = [], []  # per input entry j: d out / d x_j and d/dx_j (d out · DIRECTION)
    with mpmath.workdps(dps):  # (the steps are below float64's resolution: x ± t needs the digits)
        base, v = to_mp(x.astype(np.float64)), to_mp(DIRECTION)
        for j in range(3):
            e = to_mp(np.eye(3)[j])
            jacobian.append((f(base + t * e) - f(base - t * e)) / (2 * t))
            corners = f(base + t * e + t * v) - f(base + t * e - t * v) - f(base - t * e + t * v)
            curvature.append((corners + f(base - t * e - t * v)) / (4 * t * t))
    jac = np.array([[float(d) for d in row] for row in jacobian])  # (3, n_out)
    curv = np.array([[float(d) for d in row] for row in curvature])
    return jac @ weights, np.abs(jac) @ np.abs(weights), curv @ weights, np.abs(curv) @ np.abs(weights)


def _close(got, exact, scale, dtype, ulps: float, what: str) -> None:
    """Within `ulps` of each entry's scale; where the exact value overflows the dtype, the
    infinity of its sign."""
    info = np.finfo(dtype)
    overflows = np.abs(exact) > info.max
    assert np.all(got[overflows] == np.sign(exact[overflows]) * np.inf), f"{what}: {got}, exactly {exact}"
    fits = ~overflows
    assert np.all(np.isfinite(got[fits])), f"{what}: {got} is not finite where exactly {exact}"
    tolerance = ulps * info.eps * np.minimum(scale[fits], info.max) + info.tiny
    error = np.abs(got[fits] - exact[fits])
    assert np.all(error <= tolerance), f"{what}: {got}, exactly {exact}, {error / tolerance * ulps} ulps of its scale"


@pytest.mark.parametrize(("spec", "point", "dtype"), CASES, ids=IDS)
def test_gradient_and_hessian_vector_product_at_stress_points(spec, point, dtype):
    """The gradient within a few ulps of the scale of its terms; the Hessian-vector product
    (a derivative of that gradient, so it carries the gradient's rounding) within a few ulps of
    its own terms' scale or of the gradient's."""
    x = sg.tensor("x", shape=(3,), dtype=dtype)
    out = spec.stable(x)
    weights = WEIGHTS[: int(np.prod(out.static_shape))]
    cost = sg.sum(out * weights.astype(dtype))
    grad = sg.grad(cost, x)
    hvp = sg.hessian_vector_product(cost, x, DIRECTION.astype(dtype))
    got_grad, got_hvp = sg.function([x], [grad, hvp])(point.astype(dtype))
    exact_grad, grad_scale, exact_hvp, hvp_scale = _exact_derivatives(spec, point.astype(dtype), weights)
    where = f"{spec.name} at {point.tolist()} ({np.dtype(dtype).name})"
    loose = LIBRARY_ULPS if spec.primitive else 1
    _close(got_grad, exact_grad, grad_scale, dtype, spec.ulps * loose, f"gradient of {where}")
    carried = np.max(grad_scale) * np.max(np.abs(DIRECTION))
    hvp_scale = np.maximum(hvp_scale, carried)
    _close(got_hvp, exact_hvp, hvp_scale, dtype, 64 * loose, f"Hessian-vector product of {where}")
