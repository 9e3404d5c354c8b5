"""Reverse-mode differentiation: `grad`, `jacobian`, `hessian_vector_product`.

`grad` walks the cost's graph backwards and calls each op's `pullback`, which
builds graph with the same functions users call, so gradients of gradients need
nothing extra.  Before walking, the cost's graph is passed through the
value-preserving recognition rewrites, so the gradient of a naive
`log(sum(exp(x)))` is the stable pullback of `logsumexp`, not the naive one.
Such a gradient remembers how it was taken (`Derivation`), so that the same graph
means the same thing however it is compiled: `function(..., recognition=False)`
takes it of the formula as written, and `explain` lists the rewrites behind it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from .errors import GradientError, attributed_to
from .graph import hooks
from .graph.basic import Apply, Constant, Variable, Zero, ancestors, paused_gc, substitute, toposort
from .ops.base import Elementwise
from .ops.creation import Alloc, arange, ones_like, zeros, zeros_like
from .ops.elementwise import astype, equal
from .ops.indexing import IndexUpdate
from .ops.reduction import sum as sum_
from .ops.scan import scan
from .ops.shape import reduce_to, reshape, shape_tuple, size, stack
from .rewrite import Change, ChangeLog, recognise_for_grad
from .rewrite.patterns import is_constant, owner


@paused_gc
def grad(cost: Variable, wrt, disconnected: str = "raise", recognition: bool = True):
    """Gradient of a scalar `cost` w.r.t. one variable or a list of them, as graph.

    `disconnected="raise"` (default) errors when `cost` does not depend on a
    `wrt`; `"zero"` returns zeros for it instead.  The result has the structure
    of `wrt`: one variable, or a list.

    >>> import stablegrad as sg
    >>> x = sg.vector("x")
    >>> g = sg.grad(sg.sum(x ** 2), x)
    >>> sg.function([x], g)([1.0, 2.0])
    array([2., 4.])
    """
    # (an array or a number is one wrongly typed wrt, not a list of them)
    single = isinstance(wrt, Variable | np.ndarray) or not isinstance(wrt, Iterable)
    targets = [wrt] if single else list(wrt)
    _check_grad_args(cost, targets, disconnected)
    written, log = cost, ChangeLog()
    if recognition:
        cost = recognise_for_grad(cost, targets, log)
    grads = _backpropagate([(cost, ones_like(cost))], targets)
    reachable: set[int] | None = None  # walked only if some wrt got no gradient
    result = []
    for i, w in enumerate(targets):
        g = grads.get(w.id)
        if g is None:
            if reachable is None:
                reachable = {v.id for v in ancestors([cost])}
            if w.id not in reachable and disconnected == "raise":
                raise GradientError(
                    f"grad: wrt[{i}] {_describe(w)} is not part of the cost's graph "
                    "(pass disconnected='zero' to get zeros for it)"
                )
            g = zeros_like(w)
        result.append(g)
    if recognition and (cost is not written or any(v.derivation is not None for v in ancestors([written]))):
        result = Derivation(written, targets, disconnected, log).mark(result, cost)
    return result[0] if single else result


class Derivation:
    """How `grad` took gradients of a recognised formula: from `cost` as written, w.r.t. `wrt`.

    Kept on each gradient (`Variable.derivation`, with its index), so that a graph
    means one thing on every path: `function(..., recognition=False)` replaces the
    gradient by the derivative of the formula as written (`written`), and `explain`
    lists the rewrites it was taken through (`changes`, nested gradients' included).
    """

    def __init__(self, cost: Variable, wrt: list[Variable], disconnected: str, log: ChangeLog):
        self.cost = cost
        self.wrt = wrt
        self.disconnected = disconnected
        self.changes: list[Change] = derivation_changes([cost]) + log.changes
        self._written: list[Variable] | None = None

    def written(self, index: int) -> Variable:
        """The index-th gradient, of the formula as written."""
        if self._written is None:
            (cost,) = as_written([self.cost])
            self._written = grad(cost, self.wrt, self.disconnected, recognition=False)
        return self._written[index]

    def mark(self, grads: list[Variable], recognised_cost: Variable) -> list[Variable]:
        """`grads`, each carrying this derivation: a variable the graph already had (an input,
        a forward value) is first copied, so that marking it cannot change another formula."""
        taken = {v.id for v in ancestors([recognised_cost])} | {w.id for w in self.wrt}
        marked = []
        for i, g in enumerate(grads):
            node = g.owner
            if node is None:  # a constant or an input: no node to copy, nothing to mark
                marked.append(g)
                continue
            if g.id in taken or g.derivation is not None:
                g = Apply(node.op, list(node.inputs), [v.type for v in node.outputs], node.location).outputs[g.index]
            g.derivation = (self, i)
            marked.append(g)
        return marked


def as_written(outputs: Sequence[Variable]) -> list[Variable]:
    """`outputs` with every gradient in their graph taken of the formula as written."""
    written = {v.id: _written(v.derivation) for v in ancestors(outputs) if v.derivation is not None}
    return substitute(outputs, written) if written else list(outputs)


def _written(derivation: tuple[Derivation, int]) -> Variable:
    how, index = derivation
    return how.written(index)


def derivation_changes(outputs: Sequence[Variable]) -> list[Change]:
    """The recognition rewrites that the gradients in the graph of `outputs` were taken through."""
    seen: set[int] = set()
    changes: list[Change] = []
    for v in ancestors(outputs):
        if v.derivation is not None and id(v.derivation[0]) not in seen:
            seen.add(id(v.derivation[0]))
            changes.extend(v.derivation[0].changes)
    return changes


def _describe(v: Variable) -> str:
    return repr(v.name) if v.name else repr(v)


def _check_grad_args(cost, targets, disconnected) -> None:
    if disconnected not in ("raise", "zero"):
        raise GradientError(f"grad: disconnected must be 'raise' or 'zero', got {disconnected!r}")
    if not isinstance(cost, Variable):
        raise GradientError(f"grad: cost must be a symbolic Variable, got {type(cost).__name__}")
    if cost.ndim != 0:
        raise GradientError(
            f"grad: cost must be a scalar, got shape {str(cost.type.shape).replace('None', '?')}; "
            "reduce it first (sg.sum) or use sg.jacobian"
        )
    if not cost.type.is_float():
        raise GradientError(f"grad: cost must be a float scalar, got {cost.type}")
    for i, w in enumerate(targets):
        if not isinstance(w, Variable):
            raise GradientError(f"grad: wrt[{i}] must be a symbolic Variable, got {type(w).__name__}")
        if isinstance(w, Constant):
            raise GradientError(f"grad: wrt[{i}] is a constant; differentiate with respect to an input")
        if not w.type.is_float():
            raise GradientError(f"grad: wrt[{i}] {_describe(w)} has dtype {w.dtype.name}; only floats have gradients")


def vjp(outputs: Sequence[Variable], cotangents: Sequence[Variable], wrt: Sequence[Variable]) -> list:
    """Vector-Jacobian product: sum_k cotangents[k] · d outputs[k] / d wrt, per wrt.

    An entry is a `Zero` where no output depends on that wrt.  This is how a
    composite's pullback is derived from its body.
    """
    grads = _backpropagate(list(zip(outputs, cotangents)), wrt)
    return [grads.get(w.id, Zero(w.type)) for w in wrt]


hooks.vjp.provide(vjp)  # composites and loops differentiate their bodies with it (ops cannot import autodiff)


def _backpropagate(seeds: Sequence[tuple[Variable, Variable]], targets: Sequence[Variable]) -> dict[int, Variable]:
    """Cotangent of every variable between `targets` and the seeded outputs (keyed by variable id)."""
    nodes = toposort([out for out, _ in seeds], stop=targets)
    depends = {w.id for w in targets}
    on_path = []
    for node in nodes:
        if any(v.id in depends for v in node.inputs):
            depends.update(o.id for o in node.outputs)
            on_path.append(node)
    grads: dict[int, Variable] = {}
    for out, cotangent in seeds:
        if out.id in depends and not isinstance(cotangent, Zero):
            previous = grads.get(out.id)
            grads[out.id] = cotangent if previous is None else previous + cotangent
    for node in reversed(on_path):
        found = [grads.get(o.id) for o in node.outputs]
        if all(g is None for g in found):
            continue
        out_grads = [g if g is not None else zeros_like(o) for g, o in zip(found, node.outputs)]
        with attributed_to(node.location):  # the gradient's nodes belong to the user's line, not to grad()'s
            in_grads = node.op.pullback(node.inputs, node.outputs, out_grads)
        for i, (v, g) in enumerate(zip(node.inputs, in_grads)):
            if v.id not in depends or isinstance(g, Zero) or not v.type.is_float():
                continue
            g = _fit(g, v, _keeps_shape(node, i))
            previous = grads.get(v.id)
            grads[v.id] = g if previous is None else _accumulate(previous, g)
    return grads


def _accumulate(total: Variable, g: Variable) -> Variable:
    """total + g, where an indexing's pullback (zeros with g added at the index) is instead added
    at its index into the total: T indexings of one array then cost T updates of one buffer
    (which the backends do in place), not T full-size sums of mostly zeros."""
    for into, scattered in ((total, g), (g, total)):
        node = scattered.owner
        if (
            node is not None
            and isinstance(node.op, IndexUpdate)
            and node.op.mode == "add"
            and _all_zeros(node.inputs[0])
            and into.type == scattered.type
        ):
            return IndexUpdate(node.op.spec, "add")(into, *node.inputs[1:])
    return total + g


def _all_zeros(v: Variable) -> bool:
    """A constant of zeros, or `full(shape, 0)` allocated when the function runs."""
    filled = owner(v, Alloc)
    return is_constant(v if filled is None else filled.inputs[0], 0.0)


def _keeps_shape(node: Apply, i: int) -> bool:
    """Whether operand i of an elementwise node surely has the output's run-time shape.

    True when every other operand is all ones (a scalar, a bias of shape (1, 1), ...)
    and cannot widen it.  Then the gradient of operand i needs no `reduce_to`, even
    where extents are unknown; skipping it keeps the gradient of a long elementwise
    chain on symbolic shapes at one node per rule instead of three.
    """
    if not isinstance(node.op, Elementwise) or node.inputs[i].ndim != node.outputs[0].ndim:
        return False
    return all(all(d == 1 for d in u.type.shape) for k, u in enumerate(node.inputs) if k != i)


def _fit(g: Variable, v: Variable, same_shape: bool = False) -> Variable:
    """g summed over the axes along which v was broadcast, in v's dtype.

    `same_shape`: g is known to have v's run-time shape, so only static shapes need comparing.
    """
    if g.type.shape != v.type.shape or (None in v.type.shape and not same_shape):
        g = reduce_to(g, shape_tuple(v))
    return g if g.dtype == v.dtype else astype(g, v.dtype)


def jacobian(y: Variable, x, disconnected: str = "zero"):
    """d y / d x as a tensor of shape y.shape + x.shape, one reverse pass per entry of y.

    With y's shape known statically the passes are unrolled (one gradient per entry,
    best for small outputs); otherwise they run as a loop over the rows of an identity
    matrix of y's run-time size.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.jacobian(x * x, x))(np.array([1.0, 3.0]))
    array([[2., 0.],
           [0., 6.]])
    """
    single = isinstance(x, Variable)
    xs = [x] if single else list(x)
    result = (
        _jacobian_unrolled(y, xs, disconnected) if None not in y.type.shape else _jacobian_loop(y, xs, disconnected)
    )
    return result[0] if single else result


def _jacobian_unrolled(y: Variable, xs: list[Variable], disconnected: str) -> list[Variable]:
    n = math.prod(d for d in y.type.shape if d is not None)
    flat = reshape(y, (n,)) if y.ndim != 1 else y
    rows = [grad(flat[i], xs, disconnected=disconnected) for i in range(n)]
    result = []
    for j, w in enumerate(xs):
        if n == 0:
            result.append(zeros(y.type.shape + tuple(shape_tuple(w)), dtype=w.dtype))
            continue
        stacked = stack([row[j] for row in rows])
        result.append(reshape(stacked, y.type.shape + tuple(shape_tuple(w))))
    return result


def _jacobian_loop(y: Variable, xs: list[Variable], disconnected: str) -> list[Variable]:
    flat = reshape(y, (-1,))
    entry = arange(size(flat))
    basis = astype(equal(entry[:, None], entry[None, :]), y.dtype)  # row k picks entry k of y

    def row(carry, e):
        return carry, tuple(grad(sum_(flat * e), xs, disconnected=disconnected))

    _, rows = scan(row, init=Constant(np.zeros((), y.dtype)), xs=basis)
    return [reshape(r, tuple(shape_tuple(y)) + tuple(shape_tuple(w))) for r, w in zip(rows, xs)]


def jvp(outputs, wrt, tangents):
    """Jacobian-vector product (forward mode): d outputs / d wrt · tangents, as graph.

    `outputs` is one variable or a list; `wrt` and `tangents` are one variable (or array)
    or lists of the same length, each tangent shaped as its wrt.  The result has the
    structure of `outputs`: per output, sum_j J_j · tangents[j].

    It is the transpose of the reverse mode: with a stand-in cotangent u per output,
    v ↦ <grad of <u, outputs>, tangents> is linear in u, and its gradient in u is J·v.
    Both gradients go through `grad`, so recognised formulas push forward as the stable
    primitives they became, and the stand-ins leave no trace in the result.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> jv = sg.jvp(sg.logsumexp(x), x, np.array([1.0, 0.0]))   # softmax(x)[0]
    >>> float(sg.function([x], jv)(np.array([1000.0, 1000.0])))
    0.5
    """
    single_out = isinstance(outputs, Variable)
    outs = [outputs] if single_out else list(outputs)
    single_in = isinstance(wrt, Variable)
    ws = [wrt] if single_in else list(wrt)
    ts = [tangents] if single_in else list(tangents)
    if len(ts) != len(ws):
        raise GradientError(f"jvp: got {len(ts)} tangents for {len(ws)} wrt variables")
    ts = [_as_tangent(t, w, j) for j, (t, w) in enumerate(zip(ts, ws))]
    for k, y in enumerate(outs):
        if not isinstance(y, Variable) or not y.type.is_float():
            raise GradientError(f"jvp: outputs[{k}] must be a float symbolic Variable, got {_what(y)}")
    stand_ins = [Variable(y.type, name=f"cotangent{k}") for k, y in enumerate(outs)]
    paired = [sum_(u * y) for u, y in zip(stand_ins, outs)]
    pulled = grad(_total(paired), ws, disconnected="zero")
    pushed = grad(_total([sum_(g * t) for g, t in zip(pulled, ts)]), stand_ins, disconnected="zero")
    # the derivative of a linear map does not depend on where it is taken; what reads a stand-in
    # reads its shape, which is the output's
    results = substitute(pushed, {u.id: zeros_like(y) for u, y in zip(stand_ins, outs)})
    return results[0] if single_out else results


def _as_tangent(t, w: Variable, j: int) -> Variable:
    tangent = t if isinstance(t, Variable) else Constant(np.asarray(t, dtype=w.dtype))
    if tangent.ndim != w.ndim:
        raise GradientError(f"jvp: tangents[{j}] has {tangent.ndim} dimensions, its wrt {_describe(w)} {w.ndim}")
    return tangent


def _total(terms: list[Variable]) -> Variable:
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _what(value) -> str:
    return str(value) if isinstance(value, Variable) else type(value).__name__


def hessian(cost: Variable, wrt, disconnected: str = "raise"):
    """The Hessian of scalar `cost` w.r.t. `wrt` (one variable), shape wrt.shape + wrt.shape.

    The gradient's Jacobian, one reverse pass per entry of `wrt` (whose shape must be
    known statically); for large `wrt` use `hessian_vector_product`.
    """
    if not isinstance(wrt, Variable):
        raise GradientError(f"hessian: wrt must be one symbolic Variable, got {_what(wrt)}")
    return jacobian(grad(cost, wrt, disconnected=disconnected), wrt)


def hessian_vector_product(cost: Variable, wrt, vector, disconnected: str = "raise"):
    """H v for the Hessian H of scalar `cost` w.r.t. `wrt`, without forming H.

    `vector` has the structure of `wrt` (one tensor, or a list of them).
    """
    single = isinstance(wrt, Variable)
    ws = [wrt] if single else list(wrt)
    vs = [vector] if single else list(vector)
    if len(vs) != len(ws):
        raise GradientError(f"hessian_vector_product: got {len(vs)} vectors for {len(ws)} wrt variables")
    grads = grad(cost, ws, disconnected=disconnected)
    inner = sum_(grads[0] * vs[0])
    for g, v in zip(grads[1:], vs[1:]):
        inner = inner + sum_(g * v)
    hv = grad(inner, ws, disconnected="zero")
    return hv[0] if single else hv
