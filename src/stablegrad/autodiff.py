"""Differentiation: reverse mode (`grad`, `vjp`), forward mode (`jvp`), and `jacobian`/`hessian`.

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
from .graph import hooks, names
from .graph.basic import Apply, Constant, Variable, Zero, ancestors, paused_gc, substitute, toposort
from .ops.base import Elementwise
from .ops.complex_parts import real
from .ops.creation import Alloc, arange, ones_like, zeros, zeros_like
from .ops.dims import labelled
from .ops.elementwise import astype, equal
from .ops.indexing import IndexUpdate
from .ops.reduction import sum as sum_
from .ops.scan import scan
from .ops.shape import broadcast_to, reduce_to, reshape, shape_tuple, size, stack
from .rewrite import Change, ChangeLog, recognise, recognise_for_grad
from .rewrite.patterns import is_constant, owner


@paused_gc
@names.positional()  # the derivative is library code: built by position (see graph.names)
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
    if recognition and _recognised([cost], [written]):

        def redo():
            return grad(as_written([written])[0], targets, disconnected, recognition=False)

        result = Derivation([written], targets, redo, log).mark(result, [cost])
    result = _named_like(result, targets, [written])
    return result[0] if single else result


def _named_like(results: list, like: Sequence[Variable], forward: Sequence[Variable]) -> list:
    """Each result with the dims of its counterpart in `like` (a gradient keeps its wrt's names);
    a value of the forward graph is copied first rather than renamed under the user."""
    if all(v.dims is None for v in like):
        return results
    taken = {v.id for v in ancestors(forward)}
    return [labelled(r, w.dims, copy=r.id in taken) for r, w in zip(results, like)]


def _recognised(recognised: Sequence[Variable], written: Sequence[Variable]) -> bool:
    """Whether recognition rewrote any of `written`, or a derivative in their graph was taken recognised."""
    return any(r is not w for r, w in zip(recognised, written)) or any(
        v.derivation is not None for v in ancestors(written)
    )


class Derivation:
    """How `grad` or `jvp` took derivatives of recognised formulas (`sources`, as written).

    Kept on each result (`Variable.derivation`, with its index), so that a graph means one
    thing on every path: `function(..., recognition=False)` replaces the result by the
    derivative of the formulas as written (`redo`, called once), and `explain` lists the
    rewrites it was taken through (`changes`, nested derivatives' included).
    """

    def __init__(self, sources: list[Variable], wrt: list[Variable], redo, log: ChangeLog):
        self.wrt = wrt
        self.changes: list[Change] = derivation_changes(sources) + log.changes
        self._redo = redo
        self._written: list[Variable] | None = None

    def written(self, index: int) -> Variable:
        """The index-th result, of the formulas as written."""
        if self._written is None:
            self._written = list(self._redo())
        return self._written[index]

    def mark(self, results: list[Variable], recognised: list[Variable]) -> list[Variable]:
        """`results`, each carrying this derivation: a variable the graph already had (an input,
        a forward value) is first copied, so that marking it cannot change another formula."""
        taken = {v.id for v in ancestors(recognised)} | {w.id for w in self.wrt}
        marked = []
        for i, g in enumerate(results):
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


@names.positional()
def vjp(outputs: Sequence[Variable], cotangents: Sequence[Variable], wrt: Sequence[Variable]) -> list:
    """Vector-Jacobian product: sum_k cotangents[k] · d outputs[k] / d wrt, per wrt.

    An entry is a `Zero` where no output depends on that wrt.  This is how a
    composite's pullback is derived from its body.
    """
    grads = _backpropagate(list(zip(outputs, cotangents)), wrt)
    return [grads.get(w.id, Zero(w.type)) for w in wrt]


hooks.vjp.provide(vjp)  # composites and loops differentiate their bodies with it (ops cannot import autodiff)


def _backpropagate(
    seeds: Sequence[tuple[Variable, Variable]], targets: Sequence[Variable], boundary: Sequence[Variable] = ()
) -> dict[int, Variable]:
    """Cotangent of every variable between `targets` and the seeded outputs (keyed by variable id).

    `boundary`: variables known not to depend on `targets`; the walk does not look above them.
    """
    nodes = toposort([out for out, _ in seeds], stop=[*targets, *boundary])
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


@names.positional()
def jacobian(y: Variable, x, disconnected: str = "zero"):
    """d y / d x as a tensor of shape y.shape + x.shape, by the cheaper mode.

    With every shape known statically, forward mode where `x` has fewer entries than y
    (one `jvp` per entry of x, columns), else reverse mode (one gradient per entry of y,
    rows).  With y's extents unknown, the reverse passes run as a loop over the rows of an
    identity matrix of y's run-time size.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.jacobian(x * x, x))(np.array([1.0, 3.0]))
    array([[2., 0.],
           [0., 6.]])
    """
    single = isinstance(x, Variable)
    xs = [x] if single else list(x)
    if None in y.type.shape:
        result = _jacobian_loop(y, xs, disconnected)
    elif _forward_is_cheaper(y, xs):
        result = _jacobian_forward(y, xs, disconnected)
    else:
        result = _jacobian_unrolled(y, xs, disconnected)
    return result[0] if single else result


def _forward_is_cheaper(y: Variable, xs: list[Variable]) -> bool:
    """Fewer entries in the inputs than in the output, all known statically (and all float)."""
    if any(None in w.type.shape or not w.type.is_float() for w in xs) or not y.type.is_float():
        return False
    return sum(math.prod(_known(w)) for w in xs) < math.prod(_known(y))


def _known(v: Variable) -> tuple[int, ...]:
    """v's static shape, where every extent is known."""
    return tuple(d for d in v.type.shape if d is not None)


def _jacobian_forward(y: Variable, xs: list[Variable], disconnected: str) -> list[Variable]:
    """One jvp per entry of the inputs, a one-hot tangent each: the Jacobian's columns."""
    if disconnected == "raise":
        reachable = {v.id for v in ancestors([y])}
        for i, w in enumerate(xs):
            if w.id not in reachable:
                raise GradientError(
                    f"jacobian: wrt[{i}] {_describe(w)} is not part of y's graph (pass disconnected='zero' for zeros)"
                )
    zeros_of = [np.zeros(_known(w), w.dtype) for w in xs]
    result = []
    for j, w in enumerate(xs):
        columns = []
        for entry in range(math.prod(_known(w))):
            one_hot = np.zeros(_known(w), w.dtype)
            one_hot.flat[entry] = 1
            tangents = [one_hot if k == j else zeros_of[k] for k in range(len(xs))]
            columns.append(jvp(y, xs, tangents))
        if not columns:
            result.append(zeros(y.type.shape + w.type.shape, dtype=w.dtype))
            continue
        stacked = stack(columns, axis=-1) if y.ndim else stack(columns)
        result.append(reshape(stacked, y.type.shape + w.type.shape))
    return result


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


@names.positional()
def jvp(outputs, wrt, tangents, recognition: bool = True):
    """Jacobian-vector product (forward mode): d outputs / d wrt · tangents, as graph.

    `outputs` is one variable or a list; `wrt` and `tangents` are one variable (or array)
    or lists of the same length, each tangent shaped as its wrt.  The result has the
    structure of `outputs`: per output, sum_j J_j · tangents[j].

    One forward sweep from `wrt` to `outputs` calls each op's `pushforward`, after the
    same recognition `grad` runs first, so recognised formulas push forward as the stable
    primitives they became.

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
    written, log = outs, ChangeLog()
    if recognition:
        outs = recognise(outs, keep=ws, log=log)
    pushed = _push_forward(outs, ws, ts)
    results = [pushed[y.id] if y.id in pushed else zeros_like(y) for y in outs]
    if recognition and _recognised(outs, written):

        def redo():
            return jvp(as_written(written), ws, ts, recognition=False)

        results = Derivation(written, ws, redo, log).mark(results, outs)
    results = _named_like(results, written, [*written, *ws])
    return results[0] if single_out else results


def _push_forward(outputs: Sequence[Variable], wrt: Sequence[Variable], tangents: Sequence[Variable]) -> dict:
    """Tangent of every float variable between `wrt` and `outputs` that depends on them (by id)."""
    found: dict[int, Variable] = {}
    for w, t in zip(wrt, tangents):
        found[w.id] = t if w.id not in found else found[w.id] + t
    for node in toposort(outputs, stop=wrt):
        tangents_in = [found.get(v.id) if v.type.is_float() else None for v in node.inputs]
        if all(t is None for t in tangents_in):
            continue
        with attributed_to(node.location):
            tangents_out = node.op.pushforward(node.inputs, node.outputs, tangents_in)
        full = _tangent_fills(node, tangents_in)
        for out, t in zip(node.outputs, tangents_out):
            if t is not None and not isinstance(t, Zero) and out.type.is_float():
                found[out.id] = _fit_tangent(t, out, full)
    return found


def _tangent_fills(node: Apply, tangents: Sequence) -> bool:
    """Whether the node's rule surely gives tangents of its outputs' run-time shapes.  Every rule
    does but the entrywise one, whose sum spans the operands with tangents: an operand without
    one may widen the output, unless it is all ones or every extent is known."""
    if not isinstance(node.op, Elementwise) or None not in node.outputs[0].type.shape:
        return True
    return all(all(d == 1 for d in v.type.shape) for v, t in zip(node.inputs, tangents) if t is None)


def _fit_tangent(t: Variable, out: Variable, full: bool) -> Variable:
    """t in out's dtype, broadcast to out's shape unless it surely has it (`full`, and nothing
    in the static shapes says it is narrower; they may know less than the run-time ones, or more)."""
    if not full or _may_be_narrower(t.type.shape, out.type.shape):
        t = broadcast_to(t, shape_tuple(out))
    return astype(t, out.dtype)


def _may_be_narrower(shape: tuple, target: tuple) -> bool:
    """Whether an array of static `shape` may need broadcasting to reach static `target`."""
    if len(shape) != len(target):
        return True
    # equal extents, or a known one other than 1 against an unknown one (it can only be the target's)
    return not all(a == b or (a is not None and b is None and a != 1) for a, b in zip(shape, target))


def transposed_pullback(op, inputs: Sequence[Variable], outputs: Sequence[Variable], tangents: Sequence) -> list:
    """An op's pushforward from its pullback, which is linear in the cotangents u: the tangent of
    output k is the derivative in u_k of Σ_i <pullback(u)_i, ẋ_i>, taken by reverse mode over
    the pullback's own graph (the op's operands and outputs are constants there), with each
    u replaced by ones after.  A linear map's derivative does not depend on where it is taken,
    but pullbacks are linear only as functions: one that guards its zero cotangents
    (`where(g == 0, 0, g·c)`, so that 0·inf is 0) or sums in log space (log |g|) has no
    useful derivative at u = 0, and all of them are smooth at u = 1."""
    stand_ins = {k: Variable(y.type, name=f"cotangent{k}") for k, y in enumerate(outputs) if y.type.is_float()}
    cotangents = [stand_ins[k] if k in stand_ins else zeros_like(y) for k, y in enumerate(outputs)]
    partials = op.pullback(inputs, outputs, cotangents)
    # complex numbers pair by Re(a·b) (JAX's convention, ops/complex_parts.py): the pullback is the
    # transpose of the derivative as a real-linear map
    terms = [
        real(sum_(_fit(g, x) * t))
        for x, g, t in zip(inputs, partials, tangents)
        if t is not None and not isinstance(g, Zero) and x.type.is_float()
    ]
    if not terms:
        return [None] * len(outputs)
    total = _total(terms)
    pushed = _backpropagate([(total, ones_like(total))], list(stand_ins.values()), boundary=[*inputs, *outputs])
    ones = {u.id: ones_like(outputs[k]) for k, u in stand_ins.items()}
    results: list = [None] * len(outputs)
    for k, u in stand_ins.items():
        if u.id in pushed:
            results[k] = substitute([pushed[u.id]], ones)[0]
    return results


hooks.pushforward.provide(transposed_pullback)  # Op.pushforward's default (ops cannot import autodiff)


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


@names.positional()
def hessian(cost: Variable, wrt, disconnected: str = "raise"):
    """The Hessian of scalar `cost` w.r.t. `wrt` (one variable), shape wrt.shape + wrt.shape.

    The gradient's Jacobian, one reverse pass per entry of `wrt` (whose shape must be
    known statically); for large `wrt` use `hessian_vector_product`.
    """
    if not isinstance(wrt, Variable):
        raise GradientError(f"hessian: wrt must be one symbolic Variable, got {_what(wrt)}")
    return jacobian(grad(cost, wrt, disconnected=disconnected), wrt)


@names.positional()
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
