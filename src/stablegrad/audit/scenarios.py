"""The input scenarios an audit sweeps: ordinary values, large magnitudes, zeros, masks.

Each float input is swept on its own (the others stay moderate) over:

- `moderate`: standard normal entries, or the given examples (all inputs at once);
- `≈ ±1e2`, `≈ ±1e3`: past float32's exp limit (~88) and float64's (~709), entries
  about 1% apart (an offset, as large logits or log-likelihoods have);
- `≈ ±1e300`: near float64's largest numbers (float64 only: float32 cannot hold them);
- `mixed`: magnitudes from 1e-3 to 1e3, either sign, in one array;
- `zeros`: every entry 0 (log(0), 0/0, the kink of |x|);
- `-inf`: one entry -inf, the rest moderate (a masked entry, log-probability 0).

Values are drawn once per scenario and rounded to float32 where that is
representable, so a float64 run and a float32 run see the same numbers and share
one high-precision reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..graph.types import is_floating

_MIXED = (1e-3, 1.0, 30.0, 1e2, 1e3)
_MULTIPLES = (1.0, 1.25, 1.5, 2.0)


@dataclass(frozen=True)
class InputSpec:
    """A concrete input of an audited model: its name, dtype and shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def is_float(self) -> bool:
        return is_floating(self.dtype)

    def __str__(self) -> str:
        return f"{self.name}={self.dtype.name}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Scenario:
    """One point of the sweep: `kind` applied to input `target` (None: every input moderate)."""

    kind: str
    target: str | None = None
    #: the values of the other inputs, when given as examples (name -> array)
    examples: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def label(self) -> str:
        if self.target is None:
            return self.kind
        if self.kind == "mixed":
            return f"{self.target} mixed"
        if self.kind == "zeros":
            return f"{self.target} = 0"
        if self.kind == "-inf":
            return f"{self.target} with -inf"
        return f"{self.target} ≈ {self.kind}"

    def representable(self, dtype: np.dtype) -> bool:
        return not (self.kind.endswith("1e300") and float(np.finfo(dtype).max) < 1e300)

    def values(self, specs: list[InputSpec], seed: int = 0) -> list[np.ndarray]:
        """The input arrays (float64 or native, float32-representable where possible)."""
        result = []
        for index, spec in enumerate(specs):
            rng = np.random.default_rng([seed, index, _stable_hash(self.label)])
            kind = self.kind if spec.name == self.target else "moderate"
            if spec.name in self.examples and (kind == "moderate" or not spec.is_float):
                result.append(np.asarray(self.examples[spec.name], dtype=spec.dtype))
            elif not spec.is_float:
                result.append(np.zeros(spec.shape, dtype=spec.dtype))
            else:
                result.append(_draw(kind, spec.shape, rng))
        return result


def _stable_hash(text: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(text)) % (2**31)


def _round32(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        rounded = a.astype(np.float32).astype(np.float64)
    return np.where(np.isfinite(rounded) | ~np.isfinite(a), rounded, a)


def _draw(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    size = math.prod(shape)
    if kind == "moderate":
        flat = rng.standard_normal(size)
    elif kind == "zeros":
        flat = np.zeros(size)
    elif kind == "mixed":
        signs = rng.choice((-1.0, 1.0), size)
        flat = signs * rng.choice(_MIXED, size) * rng.choice(_MULTIPLES, size)
    elif kind == "-inf":
        flat = rng.standard_normal(size)
        if size:
            flat[0] = -np.inf
    else:  # "+1e3" and friends: that magnitude, entries 1% apart (so differences are ordinary)
        magnitude = float(kind)
        flat = magnitude * (1.0 + 0.01 * rng.standard_normal(size))
    return _round32(flat).reshape(shape)


def scenarios_for(specs: list[InputSpec], examples: dict | None = None) -> list[Scenario]:
    """The sweep for these inputs: `moderate`, then every kind for each float input in turn."""
    examples = dict(examples or {})
    floats = [s for s in specs if s.is_float]
    result = [Scenario("moderate", None, examples)]
    for spec in floats:
        target = spec.name
        kinds = ["+1e2", "-1e2", "+1e3", "-1e3", "+1e300", "-1e300"]
        if math.prod(spec.shape) > 1:
            kinds.append("mixed")
        kinds += ["zeros", "-inf"]
        result += [Scenario(k, target, examples) for k in kinds]
    return result
