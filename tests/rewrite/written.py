"""The written formulas' exact values for the rule tests (test_identities, test_products): mpmath
with a log that is NaN outside its domain, constants as the graph holds them, errors in ulps."""

from __future__ import annotations

import mpmath as mp
import numpy as np


def log(v):
    """log v in the extended reals: NaN below 0 (and for NaN), -inf at 0."""
    if mp.isnan(v) or v < 0:
        return mp.nan
    return -mp.inf if v == 0 else mp.log(v)


def sigmoid(v):
    return 1 / (1 + mp.exp(-v))


def as_held(dtype):
    """A written constant as the graph holds it (0.1 rounded to the dtype)."""
    return lambda v: mp.mpf(float(np.asarray(v, dtype=dtype)))


def ulps(got, expected, dtype, floor: float = 0.0) -> np.ndarray:
    """|got - expected| in ulps of max(|expected|, floor) (of the dtype's tiny, at least); 0 where they
    are equal (infinities too)."""
    info = np.finfo(dtype)
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # (an error of 1e300 ulps is inf ulps)
        error = np.where(got == expected, 0.0, np.abs(got - expected))
        return error / np.maximum(np.abs(expected), max(floor, float(info.tiny))) / float(info.eps)
