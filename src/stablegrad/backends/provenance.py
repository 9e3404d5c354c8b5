"""NaN provenance: which node first produced the inf or NaN that reached an output, and why.

The checking executor runs a compiled program keeping every intermediate's
"non-finite" flag.  A node is a *source* when it produced a new kind of
non-finite value: inf (or -inf) from operands without any, or NaN from operands
without NaN.  From every output that ended non-finite, the trace walks back
through non-finite operands to the sources it came from; the earliest such
source is the culprit.  A non-finite value that a `where` masks away before it
reaches an output (how `xlogy` or a masked `logsumexp` work inside) is never
blamed.  A loop that is blamed is re-run step by step to find the node inside
its body.

The culprit is described with the user's source line, the expression, what went
wrong (overflow, 0/0, inf − inf, 0·inf, log(0), ...) and, where a recognition
rewrite fires at that line, the stable primitive it substitutes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import NonFiniteError, format_location
from ..graph import hooks
from ..graph.basic import Apply, Variable, toposort
from ..graph.printing import expression
from ..graph.types import is_inexact
from ..ops.base import Elementwise
from ..rewrite.engine import Change, Kind
from .numpy_loops import body_program

_OVERFLOWING = {
    "exp",
    "exp2",
    "expm1",
    "sinh",
    "cosh",
    "power",
    "square",
    "multiply",
    "add",
    "subtract",
    "sum",
    "prod",
    "matmul",
    "einsum",
    "reciprocal",
    "divide",
    "tan",
    "erfcx",
}
_LOGS = {"log", "log2", "log10", "log1p", "gammaln", "digamma"}


@dataclass
class Finding:
    """The node that first produced a non-finite value that reached an output."""

    node: Apply
    #: short kind: "overflow", "0/0", "inf/inf", "inf - inf", "0*inf", "log(0)", "division by zero", "invalid", ...
    kind: str
    #: what happened, e.g. "overflows: exp(1000) > the largest float64"
    what: str
    #: whether the node computes part of the gradient rather than the value
    in_gradient: bool = False
    #: for a node inside a loop body: the loop step
    step: int | None = None
    #: the stable replacement a recognition rewrite would make at this line, if any
    advice: Change | None = None
    #: the node of the program that was run (the loop, for a node inside a loop body)
    top: Apply | None = None
    #: for a gradient node: the user's formula at the same line, whose gradient it computes
    forward: str | None = None

    @property
    def location(self) -> tuple[str, int] | None:
        return self.node.location

    @property
    def expression(self) -> str:
        return expression(self.node.outputs[0], depth=3)

    def message(self, at: str | None = None, recognition: bool = False, place: bool = True) -> str:
        """One line: where, which formula, what went wrong, and the fix when one is known."""
        where = f"{format_location(self.location)}: " if place else ""
        step = f" at loop step {self.step}" if self.step is not None else ""
        when = f" at {at}" if at else ""
        if self.in_gradient:
            formula = self.advice.before if self.advice is not None else self.forward
            subject = f"the gradient of `{formula}`" if formula else "the gradient"
            text = f"{where}{subject} {self.what} (in `{self.expression}`){step}{when}"
        else:
            formula = self.advice.before if self.advice is not None else self.expression
            text = f"{where}`{formula}` {self.what}{step}{when}"
        return text + fix_hint(self, recognition)


def fix_hint(finding: Finding, recognition: bool) -> str:
    change = finding.advice
    if change is not None:
        primitive = primitive_of(change)
        use = f"use `{primitive}`" if primitive else f"write `{change.after}`"
        if recognition:
            return f"; {use} [{change.rule}]"
        return f"; {use}, or compile with recognition on — it is rewritten automatically [{change.rule}]"
    hint = _HINTS.get(finding.kind)
    return f"; {hint}" if hint else ""


_HINTS = {
    "overflow": "work in log space (sg.logsumexp, sg.logaddexp, sg.log_softmax, sg.softplus)",
    "0/0": "a ratio of underflowed terms: work in log space (sg.log_softmax, sg.logsumexp)",
    "inf/inf": "a ratio of overflowed terms: work in log space (sg.softmax, sg.log_softmax)",
    "0*inf": "0 times an overflowed or infinite factor: sg.xlogy, or sg.where on the operand",
    "log(0)": "a probability that underflowed or is exactly 0: stay in log space (sg.log_softmax, sg.xlogy)",
}


def primitive_of(change: Change) -> str | None:
    """`sg.logsumexp` for a change whose result is `logsumexp(...)`."""
    api = hooks.public_api.get()
    head = change.after.split("(", 1)[0].strip()
    if not head.isidentifier():
        return None
    if callable(getattr(api, head, None)):
        return f"sg.{head}"
    squashed = head.replace("_", "")  # an op's name (log_sum_exp) for the function's (logsumexp)
    for name in dir(api):
        if name.replace("_", "") == squashed and callable(getattr(api, name)):
            return f"sg.{name}"
    return None


def advice_at(location, changes: Sequence[Change], near: str = "") -> Change | None:
    """The recognition rewrite at `location` (one mentioning `near` first, else the last), as a
    change from the formula the user wrote (where its chain began) to where the chain ended."""
    if location is None:
        return None
    here = [c for c in changes if c.kind is Kind.RECOGNITION and c.location == location]
    if not here:
        return None
    made_by = {r.id: c for c in here for r in c.replacements}

    def first(change: Change) -> Change:
        """The change that began the chain `change` ends (what it replaced was no change's result)."""
        seen = {id(change)}
        while change.replaced.id in made_by and id(made_by[change.replaced.id]) not in seen:
            change = made_by[change.replaced.id]
            seen.add(id(change))
        return change

    mentioning = [c for c in here if near and near in first(c).before]
    last = (mentioning or here)[-1]
    begun = first(last)
    if begun is last:
        return last
    return Change(last.rule, last.kind, last.location, begun.replaced, last.replacements, last.note)


# -- the checking executor ---------------------------------------------------------------------------------
@dataclass
class _Source:
    step: int
    node: Apply
    kind: str
    what: str


def trace(program, values: Sequence[np.ndarray], bad_outputs: Sequence[int] | None = None) -> Finding | None:
    """Run `program` (a `numpy_program.Program`) on `values`; the source of the non-finite outputs, or None.

    `bad_outputs` are positions in the program's outputs to trace from (default:
    every output that has a non-finite entry its inputs did not already have).
    """
    storage: list = [None] * program.nslots
    nonfinite = [False] * program.nslots
    producer: dict[int, int] = {}
    sources: dict[int, _Source] = {}
    for s, data in program.constants:
        storage[s] = data
    for s, v in zip(program.input_slots, values):
        storage[s] = v
        nonfinite[s] = _has_nonfinite(v)
    with np.errstate(all="ignore"):
        for i, (fn, ins, out, single, _frees, node) in enumerate(program.steps):
            args = [storage[s] for s in ins]
            result = fn(*args)
            outs = [out] if single else list(out)
            results = [result] if single else list(result)
            for s, r in zip(outs, results):
                storage[s] = r
                producer[s] = i
                nonfinite[s] = _has_nonfinite(r)
            source = _new_nonfinite(node, args, results)
            if source is not None:
                sources[i] = _Source(i, node, *source)
    if bad_outputs is None:
        bad_outputs = [k for k, s in enumerate(program.output_slots) if nonfinite[s]]
    culprit = _earliest_source(program, [program.output_slots[k] for k in bad_outputs], nonfinite, producer, sources)
    if culprit is None:
        return None
    finding = Finding(culprit.node, culprit.kind, culprit.what, top=culprit.node)
    if getattr(culprit.node.op, "name", "") == "scan":
        inner = _inside_loop(culprit.node.op, [storage[s] for s in program.steps[culprit.step][1]])
        if inner is not None:
            inner.top = culprit.node
            return inner
    return finding


def _has_nonfinite(value) -> bool:
    a = np.asarray(value)
    return is_inexact(a.dtype) and not bool(np.isfinite(a).all())


def _flags(values) -> tuple[bool, bool]:
    has_nan = has_inf = False
    for v in values:
        a = np.asarray(v)
        if is_inexact(a.dtype):
            has_nan = has_nan or bool(np.isnan(a).any())
            has_inf = has_inf or bool(np.isinf(a).any())
    return has_nan, has_inf


def _new_nonfinite(node: Apply, args: list, results: list) -> tuple[str, str] | None:
    out_nan, out_inf = _flags(results)
    if not (out_nan or out_inf):
        return None
    in_nan, in_inf = _flags(args)
    new_nan, new_inf = out_nan and not in_nan, out_inf and not in_inf
    if not (new_nan or new_inf):
        return None
    return describe(node, args, results, nan=new_nan)


def _earliest_source(program, bad_slots, nonfinite, producer, sources) -> _Source | None:
    inputs_of = {i: step[1] for i, step in enumerate(program.steps)}
    seen: set[int] = set()
    stack = [s for s in bad_slots if nonfinite[s]]
    best: _Source | None = None
    while stack:
        slot = stack.pop()
        if slot in seen or slot not in producer:
            continue
        seen.add(slot)
        i = producer[slot]
        if i in sources and (best is None or i < best.step):
            best = sources[i]
        stack.extend(s for s in inputs_of[i] if nonfinite[s])
    return best


def _inside_loop(op, args: list) -> Finding | None:
    """Re-run a blamed loop step by step with the checking executor; the culprit inside its body."""
    program = body_program(op.inner)
    n_carry, n_xs = op.n_carry, op.n_xs
    carry = list(args[:n_carry])
    xs = args[n_carry : n_carry + n_xs]
    consts = list(args[n_carry + n_xs :])
    steps = op.length if op.length is not None else (len(xs[0]) if xs else 0)
    for t in range(steps - 1, -1, -1) if op.reverse else range(steps):
        values = carry + [x[t] for x in xs] + consts
        inner = trace(program, values)
        if inner is not None:
            inner.step = t
            return inner
        with np.errstate(all="ignore"):
            carry = list(program.run(values)[:n_carry])
    return None


# -- describing the failure ----------------------------------------------------------------------------------
def describe(node: Apply, args: list, results: list, nan: bool) -> tuple[str, str]:
    """(kind, text) for the first entry where `node` produced a new NaN (or inf)."""
    name = node.op.name
    out = np.asarray(results[0]) if len(results) == 1 else None
    operands = _operands_at_first_bad(node, args, out, nan)
    dtype = np.asarray(results[0]).dtype.name if results else ""
    if operands is not None and len(operands) == 2 and name in ("divide", "true_divide"):
        a, b = operands
        if b == 0:
            return ("0/0", "is 0/0 = NaN") if a == 0 else ("division by zero", "divides by zero")
        if np.isinf(a) and np.isinf(b):
            return "inf/inf", "is inf/inf = NaN"
    if operands is not None and len(operands) == 2 and name == "multiply" and nan:
        a, b = operands
        if (a == 0 and np.isinf(b)) or (b == 0 and np.isinf(a)):
            return "0*inf", "is 0·inf = NaN"
    if operands is not None and len(operands) == 2 and name in ("add", "subtract") and nan:
        return "inf - inf", "is inf − inf = NaN"
    if name in _LOGS and operands is not None:
        (a,) = operands[:1]
        if not nan and (a == 0 or (name == "log1p" and a == -1)):
            return "log(0)", f"is {name}({_num(a)}) = -inf"
        if nan:
            return "invalid", f"is {name} of a negative number ({_num(a)}) = NaN"
    if name in ("sum", "matmul", "einsum") and nan:
        return "inf - inf", "adds inf and -inf (NaN)"
    if not nan:
        if operands is not None and len(operands) == 1:
            return "overflow", f"overflows ({name}({_num(operands[0])}) is past the {dtype} range)"
        if name in _OVERFLOWING:
            return "overflow", f"overflows (past the {dtype} range)"
        return "inf", "gives inf"
    if name == "sqrt":
        return "invalid", "is sqrt of a negative number = NaN"
    return "nan", "gives NaN"


def _num(value) -> str:
    return f"{float(value):.3g}"


def _operands_at_first_bad(node: Apply, args: list, out, nan: bool) -> tuple | None:
    """The operand values at the first entry where the output went bad (elementwise ops only)."""
    if out is None or not is_inexact(out.dtype):
        return None
    bad = np.isnan(out) if nan else np.isinf(out)
    if not isinstance(node.op, Elementwise) or not bad.any():
        return None
    index = np.unravel_index(int(np.argmax(bad)), out.shape) if out.ndim else ()
    try:
        return tuple(np.broadcast_to(np.asarray(a), out.shape)[index] for a in args)
    except ValueError:
        return None


# -- check_finite ------------------------------------------------------------------------------------------
class CheckedProgram:
    """A program that raises `NonFiniteError` when an output picks up an inf or NaN the inputs did not have."""

    def __init__(self, program, advise: Callable[[Finding], Change | None], value_outputs: Sequence[Variable]):
        self.program = program
        self.nodes = program.nodes
        self._advise = advise
        self._value_nodes = _ancestors_in(program, value_outputs)

    def run(self, values: Sequence[np.ndarray]) -> list:
        results = self.program.run(values)
        if not any(_has_nonfinite(r) for r in results):
            return results
        finding = trace(self.program, values)
        if finding is None:  # the non-finite entries came in with the inputs
            return results
        finding.in_gradient = id(finding.top) not in self._value_nodes
        finding.advice = self._advise(finding)
        raise NonFiniteError(finding.message(place=False), location=finding.location)


def _ancestors_in(program, outputs: Sequence[Variable]) -> set[int]:
    return {id(n) for n in toposort(outputs)}
