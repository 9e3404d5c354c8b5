"""sg.audit: flags naive formulas in the right scenario and line, passes stable ones; NaN provenance."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.audit import AuditError

pytest.importorskip("mpmath")


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def naive_lse(x):
    return sg.log(sg.sum(sg.exp(x), axis=1))


def stable_lse(x):
    return sg.logsumexp(x, axis=1)


def test_audit_flags_naive_model_in_the_right_scenario_and_line():
    report = sg.audit(naive_lse, {"x": "float64[2,3]"}, dtypes=["float64"], recognition=False)
    assert not report.ok
    failing = {row.scenario for row in report.failures}
    assert {"x ≈ +1e3", "x ≈ -1e3"} <= failing
    assert not failing & {"moderate", "x ≈ +1e2", "x = 0", "x with -inf"}
    row = next(r for r in report.rows if r.scenario == "x ≈ +1e3")
    assert row.cells[0].nonfinite == 2
    line = _line_of(naive_lse, "sg.log(sg.sum(sg.exp(x)")
    assert f"test_audit.py:{line}: `log(sum(exp(x), axis=1))` overflows" in row.finding
    assert "use `sg.logsumexp`, or compile with recognition on" in row.finding
    assert "[logsumexp_from_naive]" in row.finding


def test_audit_passes_the_stable_version_and_the_recognised_naive_one():
    assert sg.audit(stable_lse, {"x": "float64[2,3]"}, dtypes=["float64", "float32"]).ok
    recognised = sg.audit(naive_lse, {"x": "float64[2,3]"}, dtypes=["float64"])
    assert recognised.ok
    assert any("logsumexp_from_naive" in line for line in recognised.rewrites)


def test_audit_float32_fails_where_float64_does_not():
    report = sg.audit(naive_lse, {"x": "float64[2,2]"}, dtypes=["float64", "float32"], recognition=False)
    by = {(r.dtype, r.scenario): r.ok for r in report.rows}
    assert by[("float64", "x ≈ +1e2")] and not by[("float32", "x ≈ +1e2")]
    assert ("float32", "x ≈ +1e300") not in by  # not representable in float32


def test_audit_report_prints_and_converts_to_json():
    report = sg.audit(naive_lse, {"x": "float64[2,2]"}, dtypes=["float64"], recognition=False)
    text = str(report)
    assert "dtype" in text and "x ≈ +1e3" in text and "UNSTABLE" in text and "✗" in text
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["columns"] == ["value", "d/dx"]
    assert any(not row["ok"] and row["finding"] for row in data["rows"])
    assert data["tolerance"]["float64"] == {"rtol": 1e-9, "atol": 1e-12}


def test_audit_reference_agrees_with_mpmath_computed_independently():
    mpmath = pytest.importorskip("mpmath")
    from stablegrad.audit.core import _Plan
    from stablegrad.audit.model import Target
    from stablegrad.audit.mpmath_eval import Evaluator
    from stablegrad.audit.reference import weights_for

    target = Target(naive_lse, {"x": "float64[1,3]"})
    plan = _Plan(target.build(np.dtype("float64")), np.dtype("float64"), recognition=False)
    data = np.array([[1000.0, 1001.5, -3.0]])
    value, gradient = Evaluator(60)(plan.model.inputs, plan.reference_graph(), [data])
    with mpmath.workdps(60):
        terms = [mpmath.exp(mpmath.mpf(v)) for v in data[0]]
        total = mpmath.fsum(terms)
        assert abs(value[0] - mpmath.log(total)) < mpmath.mpf(10) ** -50
        weight = mpmath.mpf(float(weights_for((1,), seed=0)[0]))  # the gradient is of sum(w · output)
        for got, term in zip(gradient[0], terms):
            assert abs(got - weight * term / total) < mpmath.mpf(10) ** -50


def test_audit_accepts_outputs_and_compiled_functions():
    x = sg.tensor("x", shape=(2, 3))
    y = sg.log(sg.sum(sg.exp(x), axis=1))
    assert not sg.audit(y, [x], dtypes=["float64", "float32"], recognition=False).ok
    report = sg.audit(sg.function([x], y), dtypes=["float32"])  # re-typed to float32, recognition on
    assert report.ok and report.recognition


def test_audit_masks_a_scenario_whose_exact_value_overflows():
    def square(x):
        return sg.sum(x * x)

    report = sg.audit(square, {"x": "float64[3]"}, dtypes=["float64"])
    row = next(r for r in report.rows if r.scenario == "x ≈ +1e300")
    assert row.ok and row.cells[1].out_of_range


@pytest.mark.parametrize(
    ("target", "inputs", "message"),
    [
        (naive_lse, {"y": "float64[2]"}, "has no parameter 'y'"),
        (naive_lse, {}, "no input given for parameter 'x'"),
        (lambda x: 3.0, {"x": "float64[2]"}, "not a graph"),
        (naive_lse, {"x": "complex64[2]"}, "unsupported dtype"),
        (naive_lse, {"x": "float64[2"}, "cannot read the input spec"),
        (42, None, "cannot audit a int"),
    ],
)
def test_audit_bad_input_has_a_clear_message(target, inputs, message):
    with pytest.raises(AuditError, match=message.replace("(", r"\(")):
        sg.audit(target, inputs, dtypes=["float64"])


# -- NaN provenance: five failure kinds, each pinned to its line ------------------------------------------------
def _overflow(x):
    return sg.sum(sg.exp(x))  # MARK


def _zero_over_zero(x):
    e = sg.exp(x)
    return sg.sum(e / sg.sum(e))  # MARK


def _inf_minus_inf(x):
    return x[0] - x[1]  # MARK


def _log_of_zero_in_gradient(x):
    lx = sg.log(x)  # MARK
    return sg.sum(sg.where(x > 0, lx, 0.0))


def _zero_times_inf(x):
    return sg.sum(x[0] * x[1])  # MARK


@pytest.mark.parametrize(
    ("build", "data", "words"),
    [
        (_overflow, [1000.0, 1.0], "overflows (exp(1e+03)"),
        (_zero_over_zero, [-1000.0, -1001.0], "is 0/0 = NaN"),
        (_inf_minus_inf, [np.inf, np.inf], "is inf − inf = NaN"),
        (_log_of_zero_in_gradient, [0.0, 2.0], "is 0/0 = NaN"),
        (_zero_times_inf, [0.0, np.inf], "is 0·inf = NaN"),
    ],
)
def test_provenance_names_the_first_bad_node(build, data, words):
    x = sg.vector("x")
    cost = build(x)
    f = sg.function([x], [cost, sg.grad(cost, x, recognition=False)], recognition=False, check_finite=True)
    with pytest.raises(sg.NonFiniteError) as info:
        f(np.array(data))
    line = _line_of(build, "# MARK")
    assert info.value.location[1] == line
    assert words in info.value.message
    assert str(info.value).endswith(f"(at test_audit.py:{line})")


def test_check_finite_suggests_the_rewrite_and_stays_quiet_when_finite():
    x = sg.vector("x")
    y = sg.log(sg.sum(sg.exp(x)))
    f = sg.function([x], y, recognition=False, check_finite=True)
    assert np.isfinite(f(np.array([1.0, 2.0])))
    with pytest.raises(sg.NonFiniteError, match=r"use `sg.logsumexp`, or compile with recognition on"):
        f(np.array([1000.0, 2.0]))
    masked = sg.function([x], sg.logsumexp(x), check_finite=True)  # -inf in, -inf out: nothing new
    assert masked(np.array([-np.inf, -np.inf])) == -np.inf


def test_provenance_finds_the_node_inside_a_loop():
    xs = sg.vector("xs")

    def step(c, x):
        return c * sg.exp(x), None  # MARK

    total, _ = sg.scan(step, sg.constant(1.0), xs)
    f = sg.function([xs], total, recognition=False, check_finite=True)
    with pytest.raises(sg.NonFiniteError) as info:
        f(np.array([1.0, 800.0, 1.0]))
    assert info.value.location[1] == _line_of(step, "# MARK")
    assert "at loop step 1" in info.value.message
