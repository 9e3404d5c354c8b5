"""`stablegrad bench` / `python -m stablegrad.bench`: its report, its checks, its argument errors.

The runs here are the benchmark's own, at `--size small --rounds 1`: enough to see every
row filled and checked, not to measure anything.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from stablegrad import cli
from stablegrad.bench import SYSTEMS, System, main
from stablegrad.bench.runner import BASELINE

SMALL_CASES = ["W1 100x100 f64", "W1 100x100 f32", "W3 T=50 K=8 f64", "W5 N=10^4 K=5 f64"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def detail_rows(report: str) -> dict[tuple[str, str], dict[str, str]]:
    """The per-system table: (case, system) -> its cells by column title."""
    lines = [line for line in report.splitlines() if line.startswith("| case | system |")]
    assert len(lines) == 1, report
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in report.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| W") and len(cells) == len(header):
            row = dict(zip(header, cells))
            rows[row["case"], row["system"]] = row
    return rows


def times_row(report: str, case: str) -> dict[str, str]:
    """The cells of `case` in the first table (one column per system)."""
    header_line = next(line for line in report.splitlines() if line.startswith("| case | hand NumPy"))
    header = [cell.strip() for cell in header_line.strip("|").split("|")]
    line = next(line for line in report.splitlines() if line.startswith(f"| {case} |"))
    return dict(zip(header, (cell.strip() for cell in line.strip("|").split("|"))))


def run_small(capsys, *args: str, systems=SYSTEMS) -> tuple[int, str, str]:
    code = main(["--size", "small", "--rounds", "1", *args], systems=systems)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_timed(row: dict[str, str]) -> None:
    assert row["check"] == "ok", row
    assert float(row["ms/call"]) > 0 and float(row["first call (s)"]) >= 0 and int(row["calls/batch"]) >= 1
    assert float(row["× hand NumPy"]) > 0
    assert float(row["× best peer"].split(" (")[0]) > 0


def test_a_small_numpy_run_fills_a_checked_row_per_case_and_system(capsys):
    code, out, err = run_small(capsys, "--backends", "numpy")
    assert code == 0
    rows = detail_rows(out)
    assert sorted(rows) == sorted((case, s) for case in SMALL_CASES for s in (BASELINE, "sg numpy"))
    for row in rows.values():
        assert_timed(row)
    for case in SMALL_CASES:
        assert rows[case, BASELINE]["× hand NumPy"] == "1.00"  # the baseline against itself
        assert rows[case, "sg numpy"]["× best peer"].endswith("(hand NumPy)")  # the only peer here
        cells = times_row(out, case)
        assert float(cells[BASELINE]) > 0 and float(cells["sg numpy"]) > 0
    assert "NumPy " + np.__version__ in out and "Python " in out and "cores" in out and "threads" in out
    assert "Numba: not " in out and "JAX: not " in out  # left out: not selected (or not installed)
    assert err == ""  # the progress bar is for terminals; stderr is not one here


def test_a_wrong_system_is_shown_as_wrong_and_left_out_of_the_ratios(capsys):
    def precomputed_and_off(case):
        # fastest of all (it returns arrays it already has), and off by 1e-3: it must not be "best peer"
        outputs = [np.asarray(v) * (1 + 1e-3) for v in case.hand_numpy(*case.args)]
        return lambda *args: outputs

    def raises(case):
        raise RuntimeError("no such kernel\nsecond line")

    fake = [System("fake fast", "numpy", False, precomputed_and_off), System("fake broken", "numpy", True, raises)]
    code, out, _ = run_small(capsys, "--backends", "numpy", "--workload", "W1", systems=[*SYSTEMS, *fake])
    assert code == 1  # some system's results were wrong
    rows = detail_rows(out)
    for case in SMALL_CASES[:2]:
        wrong, broken = rows[case, "fake fast"], rows[case, "fake broken"]
        assert wrong["check"] == "WRONG" and broken["check"] == "failed"
        for row in (wrong, broken):
            assert row["ms/call"] == row["× hand NumPy"] == row["× best peer"] == row["calls/batch"] == "—"
        assert float(wrong["first call (s)"]) >= 0  # it ran once, to be checked
        for system in (BASELINE, "sg numpy"):
            assert_timed(rows[case, system])
            assert rows[case, system]["× best peer"].endswith("(hand NumPy)")
        cells = times_row(out, case)
        assert cells["fake fast"] == "WRONG" and cells["fake broken"] == "failed"
        assert f"- {case} · fake fast: WRONG: cost is off by 1.0e-03 of its largest entry" in out
        assert f"- {case} · fake broken: failed: RuntimeError: no such kernel\n" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "W1,W9"], "unknown workload 'W9' (choose from W1, W3, W5)"),
        (["--workload", ","], "no workload given (choose from W1, W3, W5)"),
        (["--size", "huge"], "unknown size 'huge' (choose from small, default)"),
        (["--backends", "numpy,torch"], "unknown backend 'torch' (choose from numpy, numba, jax)"),
        (["--rounds", "0"], "--rounds must be at least 1, got 0"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_them(args, message, capsys):
    assert cli.main(["bench", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"stablegrad bench: error: {message}\n"


def test_a_backend_that_is_not_installed_is_a_usage_error(monkeypatch, capsys):
    from stablegrad.bench import commandline

    monkeypatch.setattr(commandline, "installed", lambda library: library == "numpy")
    assert cli.main(["bench", "--backends", "jax"]) == 2
    assert capsys.readouterr().err == (
        "stablegrad bench: error: backend 'jax' needs JAX, which is not installed (pip install 'stablegrad[jax]')\n"
    )


def test_python_dash_m_runs_the_same_command():
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    result = subprocess.run(
        [sys.executable, "-m", "stablegrad.bench", "--workload", "W4"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2
    assert result.stderr == "stablegrad bench: error: unknown workload 'W4' (choose from W1, W3, W5)\n"


@pytest.mark.parametrize("library", ["numba", "jax"])
def test_the_other_backends_and_their_hand_written_peers(library, capsys):
    pytest.importorskip(library)
    code, out, _ = run_small(capsys, "--backends", library)
    assert code == 0
    rows = detail_rows(out)
    peer = {"numba": "hand Numba", "jax": "hand jax.jit"}[library]
    assert sorted(rows) == sorted((case, s) for case in SMALL_CASES for s in (BASELINE, peer, f"sg {library}"))
    for row in rows.values():
        assert_timed(row)
