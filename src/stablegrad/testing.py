"""Checks for people writing ops: gradients against finite differences, at any order.

`check_grads(fn, args)` builds `fn` on symbolic inputs shaped like `args`, and
compares the directional derivative of `sum(w * fn(x))` along random directions
with a fourth-order central difference of the compiled value, in float64.  For
`order=2` it repeats the check on the gradient itself (a Hessian-vector product).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .autodiff import grad
from .compile.function import function
from .graph.basic import Variable
from .graph.inputs import tensor
from .ops.reduction import sum as sum_


def _directional_fd(
    f: Callable[[list[np.ndarray]], float], args: list[np.ndarray], direction: list[np.ndarray], h: float
):
    def at(t: float) -> float:
        return f([a + t * d for a, d in zip(args, direction)])

    return (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)


def check_grads(
    fn: Callable[..., Variable],
    args: Sequence,
    order: int = 2,
    wrt: Sequence[int] | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    h: float = 1e-3,
    directions: int = 3,
    seed: int = 0,
    symbolic_shapes: bool = False,
) -> None:
    """Assert that the gradients of `fn` (up to `order`) match finite differences at `args`.

    With `symbolic_shapes=True` the inputs are declared with every extent unknown
    (None), so the run-time shape paths of the pullbacks are the ones checked.

    >>> import numpy as np, stablegrad as sg
    >>> sg.testing.check_grads(lambda x: sg.exp(x) * x, [np.array([0.5, -1.0])])
    """
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a, dtype=np.float64) for a in args]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)
    xs = [tensor(f"arg{i}", shape=(None,) * a.ndim if symbolic_shapes else a.shape) for i, a in enumerate(arrays)]
    out = fn(*xs)
    cotangent = rng.standard_normal(function(xs, out)(*arrays).shape)
    cost = sum_(out * cotangent)
    _check_level(cost, xs, arrays, wrt, order, rng, rtol, atol, h, directions)


def _check_level(cost, xs, arrays, wrt, order, rng, rtol, atol, h, directions) -> None:
    value = function(xs, cost)
    grads = grad(cost, [xs[i] for i in wrt], disconnected="zero")
    gradient = function(xs, grads)
    g_values = gradient(*arrays)
    for _ in range(directions):
        direction = [np.zeros_like(a) for a in arrays]
        for i in wrt:
            direction[i] = rng.standard_normal(arrays[i].shape)
        numeric = _directional_fd(lambda a: float(value(*a)), arrays, direction, h)
        analytic = sum(float(np.sum(g * direction[i])) for g, i in zip(g_values, wrt))
        scale = max(abs(numeric), abs(analytic), 1.0)
        if not abs(numeric - analytic) <= rtol * scale + atol:
            raise AssertionError(
                f"gradient mismatch (order {order}): analytic {analytic!r} vs finite differences {numeric!r}"
            )
    if order > 1:
        vectors = [rng.standard_normal(arrays[i].shape) for i in wrt]
        inner = sum_(grads[0] * vectors[0])
        for g, v in zip(grads[1:], vectors[1:]):
            inner = inner + sum_(g * v)
        _check_level(inner, xs, arrays, wrt, order - 1, rng, rtol * 10, atol * 10, h, directions)
