"""The yardstick: the model's value and gradient at high precision, and the error measure.

The reference evaluates the user's *original* graph, and the gradient graph
built from it with `grad(..., recognition=False)`, with the mpmath evaluator:
gradients are graphs, so the naive formula's own gradient computed without
rounding is the exact gradient.  An entry where the exact value is undefined
(NaN: `inf - inf` in exact arithmetic, a derivative at -inf without a limit) is
skipped.

The error rule is the project's stability yardstick's: an array passes when every
entry whose exact value r is defined satisfies `|y - r| <= rtol·|r| + atol·max|r| + tiny`
(`max|r|` over the array's finite entries — and at least the array's scale in the
`moderate` scenario, so that a log-likelihood that is exactly 0 is not judged
against itself — `tiny` the dtype's smallest normal number: subnormal results
carry few digits).  The reported error is
`|y - r| / (|r| + (atol/rtol)·max|r| + tiny/rtol)`, comparable to rtol.  The atol
term forgives what honest rounding loses in derivative formulas such as
`s · (v - <s, v>)`, where small entries are differences of large terms.  An entry
that is inf/NaN where r rounds to a finite number (or to the other infinity)
counts as non-finite; an exact value past the dtype's range is matched by the inf
it rounds to.
"""

from __future__ import annotations

import numpy as np

from .mpmath_eval import DEFAULT_DPS, _mpmath, to_float
from .report import Cell

#: default tolerances per dtype (rtol, atol), the stability yardstick's
DEFAULT_TOLERANCE = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-2),
}


def dps_for(dtypes) -> int:
    """Working precision enough for every dtype audited."""
    return max(DEFAULT_DPS.get(np.dtype(d).name, 330) for d in dtypes)


def scale_of(reference) -> float:
    """max|r| over the finite entries of an exact output (the `max|ref|` of the error rule)."""
    values = [abs(float(r)) for r in np.asarray(reference, dtype=object).ravel() if r == r]
    finite = [v for v in values if np.isfinite(v)]
    return max(finite) if finite else 0.0


def compare(result, reference, dtype, rtol: float, atol: float, typical: float = 0.0) -> Cell:
    """The cell for one output: `result` (floats) against `reference` (object array of mpf).

    `typical` is the output's scale at ordinary inputs: an exact 0 or a tiny result
    (`log` of a probability that sums to 1) is judged against that, not against itself.
    """
    mpmath = _mpmath()
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    y = np.asarray(result, dtype=np.float64).ravel()
    refs = np.asarray(reference, dtype=object).ravel()
    rounded = to_float(refs, dtype).astype(np.float64)
    cell = Cell(rtol=rtol)
    with mpmath.mp.workdps(30):
        finite_refs = [abs(r) for r, rr in zip(refs, rounded) if np.isfinite(rr) and r == r]
        scale = max([*finite_refs, mpmath.mpf(typical)])
        floor = scale * (atol / rtol) + mpmath.mpf(float(info.tiny)) / rtol
        worst = 0.0
        for r, rr, v in zip(refs, rounded, y):
            if r != r:
                cell.undefined += 1
                continue
            cell.compared += 1
            if not np.isfinite(v):
                if v == rr:
                    continue
                cell.nonfinite += 1
                worst = float("inf")
                continue
            if not mpmath.isfinite(r):
                worst = float("inf")
                continue
            error = abs(mpmath.mpf(float(v)) - r) / (abs(r) + floor)
            worst = max(worst, float(error))
        cell.error = worst
    return cell


def weights_for(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Fixed cotangent weights in [0.5, 1.5], exact in float32 (so every dtype sees the same cost)."""
    if not shape:
        return np.ones(())
    rng = np.random.default_rng([seed, 7919])
    return (0.5 + rng.integers(0, 1024, size=shape) / 1024.0).astype(np.float64)
