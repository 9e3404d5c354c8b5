"""Write tests/data/exp_log_fixture.npz: exact values and partial derivatives of the exp/log family
formulas in tests/test_exp_log_accuracy.py, computed with mpmath.

    python tests/make_exp_log_fixture.py [--points 192] [--jobs 2] [--missing]

(`--missing` computes only the formulas the fixture does not hold yet and keeps the others.)

Points are drawn as Herbie draws them: uniform over the float64 bit patterns inside each
operand's box (so tiny and huge magnitudes are as likely as moderate ones), seeded by the
formula's name.  A point is kept only where the exact value and every partial derivative are
finite float64 numbers.  Each exact number is computed at rising precision until two
precisions round to the same float64 (the digits a cancellation eats are then covered); a
point where 6,400 digits do not settle it is dropped.  Partial derivatives are central
differences with a step far below the float64 resolution of the operand, at that precision.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import mpmath as mp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from test_exp_log_accuracy import FIXTURE, FORMULAS, Formula

#: digits: the first is above any cancellation these formulas make between operands in 1e±324 (x² next
#: to 1 at x = 5e-324 is 648 digits down), so a value cannot round to the same wrong float at two levels
PRECISIONS = (800, 1600, 3200, 6400)


def _ordinal(v: float) -> int:
    bits = int(np.array(v, np.float64).view(np.int64))
    return -(bits & 0x7FFFFFFFFFFFFFFF) if bits < 0 else bits


def _from_ordinal(k: int) -> float:
    bits = k if k >= 0 else (-k) | -0x8000000000000000
    return float(np.array(bits, np.int64).view(np.float64))


def draw(formula: Formula, count: int) -> np.ndarray:
    """count × arity operands, uniform over the bit patterns of each box."""
    rng = np.random.default_rng(zlib.crc32(formula.name.encode()))
    columns = []
    for low, high in formula.box:
        lo, hi = _ordinal(low), _ordinal(high)
        columns.append([_from_ordinal(int(k)) for k in rng.integers(lo, hi + 1, size=count)])
    return np.array(columns).T


def _real(v) -> mp.mpf | None:
    return v if isinstance(v, mp.mpf) and mp.isfinite(v) else None


def _at(formula: Formula, point: tuple[float, ...], dps: int) -> list[float] | None:
    """[value, ∂/∂x0, ...] rounded to float64 at `dps` digits, None where not a finite real."""
    with mp.workdps(dps):
        xs = [mp.mpf(v) for v in point]
        try:
            value = _real(formula.exact(*xs))
        except (ValueError, ZeroDivisionError):
            return None
        if value is None:
            return None
        out = [float(value)]
        for i, x in enumerate(xs):
            h = max(abs(x), mp.mpf(2) ** -1074) * mp.mpf(10) ** (-dps // 3)
            up, down = list(xs), list(xs)
            up[i], down[i] = x + h, x - h
            try:
                difference = _real((formula.exact(*up) - formula.exact(*down)) / (2 * h))
            except (ValueError, ZeroDivisionError):
                return None
            if difference is None:
                return None
            out.append(float(difference))
        return out


def exact(formula: Formula, point: tuple[float, ...]) -> list[float] | None:
    """The float64 rounding of the exact value and partials, once two precisions agree."""
    previous, confirmed = None, False
    for dps in PRECISIONS:
        current = _at(formula, point, dps)
        if current is not None and not all(np.isfinite(current)):
            return None  # overflows float64 (more digits will not bring it back)
        # (a 0 agreed on twice may be two central differences whose ends rounded alike: a third level)
        if current is not None and current == previous and (0.0 not in current or confirmed):
            return current
        confirmed = current is not None and current == previous
        previous = current
    return None


def table(formula: Formula, count: int) -> np.ndarray:
    """rows: operands, value, partials; one column per kept point."""
    kept = []
    for point in draw(formula, 4 * count):
        result = exact(formula, tuple(float(v) for v in point))
        if result is not None:
            kept.append(list(point) + result)
        if len(kept) == count:
            break
    return np.array(kept).T


def _one(args):
    index, count = args
    formula = FORMULAS[index]
    result = table(formula, count)
    print(f"{formula.name}: {result.shape[1]} points", file=sys.stderr, flush=True)
    return formula.name, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=192)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--missing", action="store_true", help="only the formulas the fixture lacks")
    options = parser.parse_args()
    kept: dict[str, np.ndarray] = {}
    if options.missing and FIXTURE.exists():
        with np.load(FIXTURE) as data:
            kept = {k: data[k] for k in data.files if any(f.name == k for f in FORMULAS)}
    todo = [(i, options.points) for i, f in enumerate(FORMULAS) if f.name not in kept]
    with ProcessPoolExecutor(options.jobs) as pool:
        tables = kept | dict(pool.map(_one, todo))
    FIXTURE.parent.mkdir(exist_ok=True)
    np.savez_compressed(FIXTURE, **tables)


if __name__ == "__main__":
    main()
