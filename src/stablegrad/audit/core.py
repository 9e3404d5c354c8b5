"""`sg.audit`: sweep a model over hard inputs, compare with the exact answer, explain each failure."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..autodiff import grad
from ..backends.provenance import Finding, advice_at, trace
from ..compile.function import function
from ..errors import StableGradError
from ..graph.basic import Constant, Variable, toposort
from ..graph.printing import expression
from ..graph.types import is_floating
from ..ops.reduction import sum as sum_
from ..rewrite.engine import Change, Kind
from .model import AuditError, Model, Target, _CannotRetype, check_dtypes
from .mpmath_eval import Evaluator, to_float
from .reference import DEFAULT_TOLERANCE, compare, dps_for, scale_of, weights_for
from .report import AuditReport, Cell, Row
from .scenarios import Scenario, scenarios_for

Progress = Callable[[int, int, str], None]


def audit(
    target,
    inputs=None,
    dtypes: Sequence = ("float64", "float32"),
    *,
    examples: Mapping | None = None,
    recognition: bool | None = None,
    tolerance: tuple[float, float] | Mapping | None = None,
    dps: int | None = None,
    provenance: bool = True,
    progress: Progress | None = None,
) -> AuditReport:
    """Sweep `target` over hard inputs and compare its value and gradient with a high-precision reference.

    `target` is a function that builds a graph from symbolic inputs (with
    `inputs={"x": "float64[3,5]", ...}`), a compiled `sg.Function`, or output
    variables (with `inputs=[x, ...]`, default: every input of their graph).
    Every float input is swept over the scenarios of `audit.scenarios` in each of
    `dtypes`; unknown extents come from `examples` (name → array, which also give
    the values of integer inputs) or are 3.  The gradient is that of
    `sum(w · outputs)` for fixed weights w in [0.5, 1.5].  The reference is the
    original formula and its gradient evaluated with mpmath (`dps` digits), so
    `recognition=False` audits the formulas exactly as written.  `tolerance` is
    (rtol, atol), one pair or a mapping by dtype name (default: float64 (1e-9, 1e-12),
    float32 (1e-4, 1e-5), the stability yardstick's; see `audit.reference`).  For every failing
    scenario, the node that first produced an inf/NaN is named with its source
    line and, where a recognition rewrite would fix it, the stable primitive.

    >>> import stablegrad as sg
    >>> def naive(x):
    ...     return sg.log(sg.sum(sg.exp(x)))
    >>> report = sg.audit(naive, {"x": "float64[3]"}, dtypes=["float64"], recognition=False)  # doctest: +SKIP
    >>> report.ok  # doctest: +SKIP
    False
    """
    started = time.perf_counter()
    model = Target(target, inputs, examples, recognition)
    float_dtypes = check_dtypes(dtypes)
    tolerances = _tolerances(tolerance, float_dtypes)
    report = AuditReport(
        model=model.name,
        columns=[],
        inputs=[str(s) for s in model.specs()],
        recognition=model.recognition,
        tolerance=tolerances,
    )
    plans = []
    for dtype in float_dtypes:
        try:
            plans.append(_Plan(model.build(dtype), dtype, model.recognition))
        except _CannotRetype as exc:
            report.skipped[dtype.name] = exc.message
    if not plans:
        raise AuditError(f"nothing to audit: {'; '.join(report.skipped.values())}")
    report.columns = plans[0].columns
    reference = _Reference(max(plans, key=lambda p: p.dtype.itemsize), Evaluator(dps or dps_for(float_dtypes)))
    specs = model.specs()
    scenarios = scenarios_for(specs, model.examples)
    work = [(p, s) for p in plans for s in scenarios if s.representable(p.dtype)]
    for done, (plan, scenario) in enumerate(work):
        if progress is not None:
            progress(done, len(work), f"{plan.dtype.name} {scenario.label}")
        values = scenario.values(specs)
        report.rows.append(_audit_row(plan, scenario, values, reference, tolerances[plan.dtype.name], provenance))
    if progress is not None:
        progress(len(work), len(work), "done")
    report.approximated = sorted(reference.evaluator.approximated)
    # a rewrite made in the value graph and again in the gradient's is one line
    report.rewrites = list(dict.fromkeys(str(c) for c in plans[0].recognition_changes()))
    for plan in plans:
        if plan.gradient_error:
            report.skipped.setdefault(f"{plan.dtype.name} gradient", plan.gradient_error)
    report.seconds = time.perf_counter() - started
    report.rerun = functools.partial(
        audit,
        target,
        inputs,
        dtypes,
        examples=examples,
        recognition=not model.recognition,
        tolerance=tolerance,
        dps=dps,
        provenance=provenance,
        progress=progress,
    )
    return report


def _tolerances(tolerance, dtypes) -> dict[str, tuple[float, float]]:
    """(rtol, atol) per dtype name: the defaults, one pair for all, or a mapping by dtype name."""
    result = {}
    for d in dtypes:
        given = tolerance.get(d.name) if isinstance(tolerance, Mapping) else tolerance
        rtol, atol = given if given is not None else DEFAULT_TOLERANCE[d.name]
        result[d.name] = (float(rtol), float(atol))
    return result


@dataclass
class _Plan:
    """One dtype: the model built in it, its cost, and value + gradient compiled as the user would."""

    model: Model
    dtype: np.dtype
    recognition: bool
    gradient_error: str | None = None
    _changes: list[Change] | None = field(default=None, repr=False)

    def __post_init__(self):
        m = self.model
        self.wrt = [v for v in m.inputs if is_floating(v.dtype)]
        self.cost = _weighted_cost(m.outputs, self.dtype)
        try:
            grads = grad(self.cost, self.wrt, disconnected="zero", recognition=self.recognition) if self.wrt else []
        except StableGradError as exc:
            self.gradient_error = exc.message
            grads = []
        self.columns = list(m.names) + [f"d/d{v.name or f'input{i}'}" for i, v in enumerate(self.wrt)][: len(grads)]
        self.n_values = len(m.outputs)
        self.function = function(m.inputs, list(m.outputs) + list(grads), recognition=self.recognition)
        self.value_nodes = {id(n) for n in toposort(self.function.graph.outputs[: self.n_values], stop=m.inputs)}

    def reference_graph(self) -> list[Variable]:
        """The outputs and the gradient of the formulas as written (no recognition)."""
        if not self.wrt or self.gradient_error:
            return list(self.model.outputs)
        return list(self.model.outputs) + list(grad(self.cost, self.wrt, disconnected="zero", recognition=False))

    def formula_at(self, location) -> str | None:
        """The outermost formula the user wrote at `location` (what a gradient node differentiates)."""
        nodes = [n for n in toposort(self.model.outputs, stop=self.model.inputs) if n.location == location]
        return expression(nodes[-1].outputs[0]) if nodes else None

    def recognition_changes(self) -> list[Change]:
        """What recognition rewrites in the value graph (done already when recognition is on)."""
        if self._changes is None:
            log = self.function.changes if self.recognition else None
            if log is None:
                log = function(self.model.inputs, list(self.model.outputs), recognition=True).changes
            self._changes = [c for c in log.changes if c.kind is Kind.RECOGNITION]
        return self._changes


def _weighted_cost(outputs: list[Variable], dtype: np.dtype) -> Variable:
    """sum_i sum(w_i · output_i): one scalar whose gradient is a fixed vector-Jacobian product."""
    cost = None
    for i, out in enumerate(outputs):
        w = weights_for(tuple(n or 1 for n in out.type.shape), seed=i)
        term = sum_(out if w.ndim == 0 else out * Constant(w.astype(out.dtype)))
        cost = term if cost is None else cost + term
    assert cost is not None
    return cost


class _Reference:
    """The high-precision outputs per scenario, shared by every dtype."""

    def __init__(self, plan: _Plan, evaluator: Evaluator):
        self.plan = plan
        self.evaluator = evaluator
        self.outputs = plan.reference_graph()
        self._cache: dict[str, list] = {}
        #: each output's scale at ordinary inputs (the first scenario, `moderate`)
        self.typical: list[float] | None = None

    def __call__(self, scenario: Scenario, values: list[np.ndarray]) -> list:
        if scenario.label not in self._cache:
            exact = self.evaluator(self.plan.model.inputs, self.outputs, values)
            self._cache[scenario.label] = exact
            if self.typical is None:
                self.typical = [scale_of(e) for e in exact]
        return self._cache[scenario.label]


def _audit_row(
    plan: _Plan, scenario: Scenario, values, reference: _Reference, tolerance: tuple[float, float], provenance: bool
) -> Row:
    dtype = plan.dtype.name
    args = [np.asarray(v, dtype=i.dtype) if is_floating(i.dtype) else v for v, i in zip(values, plan.model.inputs)]
    try:
        exact = reference(scenario, values)
    except Exception as exc:  # the reference itself failed: report, do not abort the sweep
        return Row(dtype, scenario.label, [], error=f"reference failed: {type(exc).__name__}: {exc}")
    try:
        results = plan.function(*args)
    except StableGradError as exc:
        return Row(dtype, scenario.label, [], error=exc.message)
    typical = reference.typical or [0.0] * len(exact)
    cells = [compare(r, e, plan.dtype, *tolerance, typical=t) for r, e, t in zip(results, exact, typical)]
    if _past_range(exact[: plan.n_values], plan.dtype):
        # the exact value itself is past the dtype's range: the cost is ±inf, its gradient meaningless
        for cell in cells[plan.n_values :]:
            cell.out_of_range = True
    row = Row(dtype, scenario.label, cells)
    if not row.ok and provenance:
        _explain_row(row, plan, args, scenario)
    return row


def _explain_row(row: Row, plan: _Plan, args: list, scenario: Scenario) -> None:
    at = f"{scenario.label} ({plan.dtype.name})"
    bad = [k for k, c in enumerate(row.cells) if c.nonfinite]
    finding: Finding | None = trace(plan.function._program, args, bad_outputs=bad) if bad else None
    if finding is not None:
        finding.in_gradient = id(finding.top) not in plan.value_nodes
        finding.forward = plan.formula_at(finding.location)
        if not plan.recognition:
            finding.advice = advice_at(finding.location, plan.recognition_changes(), near=finding.expression)
        row.finding = finding.message(at=at, recognition=plan.recognition)
        formula = finding.advice.before if finding.advice is not None else finding.expression
        row.finding_key = (finding.location, formula, finding.kind, finding.in_gradient)
        return
    worst = max(range(len(row.cells)), key=lambda k: _badness(row.cells[k]))
    cell = row.cells[worst]
    text = f"{plan.columns[worst]} loses accuracy at {at}: relative error {cell.error:.1e}"
    if bad:
        text = f"{plan.columns[worst]} has {cell.nonfinite} inf/NaN entries at {at}"
    changes = [] if plan.recognition else plan.recognition_changes()
    if changes:
        shown = "; ".join(f"{c.before} → {c.after} at line {_line(c)} [{c.rule}]" for c in changes[:2])
        text += f"; recognition would rewrite {shown} — compile with recognition on"
    row.finding = text
    row.finding_key = ("accuracy", plan.columns[worst], tuple(c.rule for c in changes[:2]))


def _past_range(exact: list, dtype: np.dtype) -> bool:
    for e in exact:
        values = np.asarray(e, dtype=object).ravel()
        finite = np.array([bool(v == v and abs(v) != float("inf")) for v in values], dtype=bool)
        if finite.any() and not np.isfinite(to_float(values[finite], dtype)).all():
            return True
    return False


def _badness(cell: Cell) -> float:
    return float("inf") if cell.nonfinite else cell.error


def _line(change: Change) -> str:
    return str(change.location[1]) if change.location else "?"
