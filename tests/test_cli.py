"""The `stablegrad` command: audit exit codes and messages, and the demo."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from stablegrad.cli import main

pytest.importorskip("mpmath")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "naive_models.py")


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(
        textwrap.dedent(
            """\
            import stablegrad as sg

            def naive(x):
                return sg.log(sg.sum(sg.exp(x)))

            def stable(x):
                return sg.logsumexp(x)

            def not_a_graph(x):
                return 3.0

            def broken(x):
                return x + undefined_name

            VALUE = 3
            """
        )
    )
    return str(path)


def test_cli_audit_exit_codes(model, capsys):
    assert main(["audit", f"{model}:stable", "--input", "x=float64[3]"]) == 0
    assert "stable: all" in capsys.readouterr().out
    assert main(["audit", f"{model}:naive", "--input", "x=float64[3]"]) == 0  # recognition repairs it
    capsys.readouterr()
    assert main(["audit", f"{model}:naive", "--input", "x=float64[3]", "--no-recognition"]) == 1
    out = capsys.readouterr().out
    assert "UNSTABLE" in out and "model.py:4: `log(sum(exp(x), axis=0))` overflows" in out


def test_cli_audit_json(model, capsys):
    import json

    assert main(["audit", f"{model}:naive", "-i", "x=float32[2]", "--no-recognition", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["recognition"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{m}:missing", "-i", "x=float64[3]"], "has no function 'missing' (it defines: broken, naive, not_a_graph"),
        (["nowhere/model.py:f", "-i", "x=float64[3]"], "no such model file: nowhere/model.py"),
        (["no_such_module_xyz:f", "-i", "x=float64[3]"], "no module named 'no_such_module_xyz'"),
        (["{m}", "-i", "x=float64[3]"], "name a model as path/to/model.py:function"),
        (["{m}:VALUE", "-i", "x=float64[3]"], "is a int, not a function that builds a graph"),
        (["{m}:not_a_graph", "-i", "x=float64[3]"], "returned a float, not a graph"),
        (["{m}:broken", "-i", "x=float64[3]"], "failed while building its graph: name 'undefined_name'"),
        (["{m}:naive", "-i", "y=float64[3]"], "has no parameter 'y'"),
        (["{m}:naive"], "no float input to sweep"),
        (["{m}:naive", "-i", "x=float64[3]", "-i", "x=float64[2]"], "--input x is given twice"),
        (["{m}:naive", "-i", "x=complex128[3]"], "unsupported dtype 'complex128'"),
        (["{m}:naive", "-i", "x=float64[3]", "--dtypes", "int32"], "unsupported dtype 'int32' to audit"),
        (["{m}:naive", "-i", "x:float64[3]"], "write it as NAME=DTYPE[SHAPE]"),
    ],
)
def test_cli_audit_bad_input_is_one_line_and_exit_2(model, capsys, args, message):
    code = main(["audit", *(a.replace("{m}", model) for a in args)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("stablegrad audit: error: ")
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_audit_debug_shows_the_traceback(model):
    from stablegrad.audit import AuditError

    with pytest.raises(AuditError):
        main(["audit", f"{model}:missing", "-i", "x=float64[3]", "--debug"])


def test_cli_demo_runs_and_shows_the_repair(capsys):
    assert main(["demo", "--fast"]) == 0
    out = capsys.readouterr().out
    assert "UNSTABLE" in out and "stable: all" in out
    assert "hmm.py:10: `log(sum(exp(" in out and "use `sg.logsumexp`" in out
    assert "[logsumexp_from_naive]" in out and "[softmax_from_naive]" in out


def test_cli_entry_point_audits_an_example():
    command = [
        sys.executable,
        "-m",
        "stablegrad",
        "audit",
        f"{EXAMPLE}:mixture_naive",
        "--input",
        "x=float64[4]",
        "--input",
        "log_w=float64[3]",
        "--no-recognition",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    with open(EXAMPLE) as f:
        line = next(i for i, text in enumerate(f, 1) if "sg.log(sg.sum(sg.exp(" in text)
    assert f"naive_models.py:{line}: `log(sum(exp(" in result.stdout


def test_cli_version_is_the_packages(capsys):
    import stablegrad

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"stablegrad {stablegrad.__version__}"
