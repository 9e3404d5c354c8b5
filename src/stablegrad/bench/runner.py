"""The systems timed, and one run over the cases: check each system, then time those that are right.

A `System` is one column of the table: how to turn a `Case` into a model (NumPy arrays
in, a list of arrays out).  `SYSTEMS` holds the stablegrad backends and the hand-written
peers; `run` takes any list of them, so a test can add one of its own.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

import stablegrad as sg

from . import peers
from .timing import calibrate, interleaved, median_ms
from .workloads import Case, Model

LIBRARIES = ("numpy", "numba", "jax")
BASELINE = "hand NumPy"


@dataclass(frozen=True)
class System:
    """One column: `prepare(case)` is everything before the first call (building, compiling)."""

    name: str
    library: str  # "numpy", "numba" or "jax": what `--backends` selects and what must be installed
    stablegrad: bool  # a stablegrad backend, or a peer it is compared with
    prepare: Callable[[Case], Model]


def _stablegrad(backend: str) -> Callable[[Case], Model]:
    def prepare(case: Case) -> Model:
        inputs, outputs = case.graph(case.dtype)
        return sg.function(inputs, outputs, backend=backend)

    return prepare


def _hand_numpy(case: Case) -> Model:
    return case.hand_numpy


SYSTEMS: tuple[System, ...] = (
    System(BASELINE, "numpy", False, _hand_numpy),
    System("hand Numba", "numba", False, peers.numba_model),
    System("hand jax.jit", "jax", False, peers.jax_model),
    System("sg numpy", "numpy", True, _stablegrad("numpy")),
    System("sg numba", "numba", True, _stablegrad("numba")),
    System("sg jax", "jax", True, _stablegrad("jax")),
)


def installed(library: str) -> bool:
    """Whether `library` can be imported (without importing it: Numba and JAX take a second to load)."""
    return importlib.util.find_spec(library) is not None


@dataclass
class Row:
    """One system on one case: its check and, if it passed, its times and ratios."""

    case: str
    system: System
    status: str  # "ok", "WRONG" (a result off the reference) or "failed" (it raised)
    detail: str = ""  # why it is WRONG or failed
    first_call_s: float | None = None  # building + compiling + the first call
    ms: float | None = None  # median milliseconds per call
    number: int = 0  # calls per timed batch
    vs_numpy: float | None = None  # ms / hand NumPy's ms
    vs_peer: float | None = None  # ms / the best peer's ms
    best_peer: str | None = None
    model: Model | None = field(default=None, repr=False)


def mismatch(got: Sequence, reference: Sequence[np.ndarray], case: Case) -> str | None:
    """Why `got` is not the float64 reference to the case's tolerance, or None.

    Each output's largest error is measured against its largest entry, so that tiny
    gradient entries next to large ones are held to what their dtype can carry.
    """
    if len(got) != len(reference):
        return f"{len(got)} outputs, expected {len(reference)}"
    for name, value, expected in zip(case.outputs, got, reference):
        value = np.asarray(value)
        if value.shape != expected.shape:
            return f"{name} has shape {value.shape}, expected {expected.shape}"
        if not np.all(np.isfinite(value)):
            return f"{name} is not finite"
        error = float(np.max(np.abs(value.astype(np.float64) - expected), initial=0.0))
        scale = float(np.max(np.abs(expected), initial=0.0)) or 1.0
        if not error <= case.rtol * scale:
            return f"{name} is off by {error / scale:.1e} of its largest entry (tolerance {case.rtol:g})"
    return None


def check(case: Case, system: System, reference: Sequence[np.ndarray]) -> Row:
    """Build the system's model, call it once (timed: the first call), and compare with the reference."""
    start = time.perf_counter()
    try:
        model = system.prepare(case)
        got = model(*case.args)
    except Exception as exc:  # one system failing must not stop the others
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Row(case.name, system, "failed", f"{type(exc).__name__}: {message}")
    first = time.perf_counter() - start
    problem = mismatch(got, reference, case)
    if problem is not None:
        return Row(case.name, system, "WRONG", problem, first_call_s=first)
    return Row(case.name, system, "ok", first_call_s=first, model=model)


def run(
    cases: Sequence[Case],
    systems: Sequence[System],
    rounds: int = 5,
    batch_seconds: float = 0.02,
    progress: Callable[[str], None] | None = None,
) -> list[Row]:
    """Check every system on every case, time the ones that are right, and work out the ratios.

    >>> from stablegrad.bench.workloads import cases
    >>> rows = run(cases(["W1"], "small")[:1], [SYSTEMS[0], SYSTEMS[3]], rounds=1, batch_seconds=0.001)
    >>> [(r.system.name, r.status) for r in rows]
    [('hand NumPy', 'ok'), ('sg numpy', 'ok')]
    """
    say = progress or (lambda label: None)
    rows: list[Row] = []
    for case in cases:
        # the reference: the hand-written formula in float64, on float64 copies of the inputs
        reference = [
            np.asarray(r, dtype=np.float64) for r in case.hand_numpy(*(a.astype(np.float64) for a in case.args))
        ]
        these = []
        for system in systems:
            say(f"{case.name} · {system.name} (first call, check)")
            these.append(check(case, system, reference))
        say(f"{case.name} · timing, {rounds} round{'s' if rounds != 1 else ''}")
        _time(case, [r for r in these if r.status == "ok"], rounds, batch_seconds)
        _ratios(these)
        for row in these:
            row.model = None  # compiled programs and JAX buffers go as soon as the case is done
        rows += these
    return rows


def _time(case: Case, rows: list[Row], rounds: int, batch_seconds: float) -> None:
    calls = [_bound(row.model, case.args) for row in rows]
    for row, call in zip(rows, calls):
        row.number = calibrate(call, batch_seconds)
    for row, samples in zip(rows, interleaved(calls, [row.number for row in rows], rounds)):
        row.ms = median_ms(samples)


def _bound(model: Model | None, args: tuple) -> Callable[[], object]:
    assert model is not None
    return lambda: model(*args)


def _ratios(rows: list[Row]) -> None:
    """Each timed row against hand NumPy and against the fastest peer; rows not "ok" take no part."""
    timed = [r for r in rows if r.ms is not None]
    baseline = next((r for r in timed if r.system.name == BASELINE), None)
    peers_timed = [r for r in timed if not r.system.stablegrad]
    best = min(peers_timed, key=lambda r: r.ms or 0.0, default=None)
    for row in timed:
        assert row.ms is not None
        if baseline is not None and baseline.ms:
            row.vs_numpy = row.ms / baseline.ms
        if best is not None and best.ms:
            row.vs_peer, row.best_peer = row.ms / best.ms, best.system.name
