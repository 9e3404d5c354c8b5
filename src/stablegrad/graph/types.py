"""TensorType: the static dtype and (partly known) shape of a graph variable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# imported at module level: a function-level import costs microseconds, and every node built
# broadcasts its operands' shapes
from ..errors import ShapeError

Shape = tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class TensorType:
    """dtype and shape; a shape entry is an int or None (unknown until run time)."""

    dtype: np.dtype
    shape: Shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_float(self) -> bool:
        return self.dtype.kind in "fc"

    def accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether a run-time shape fits this static shape."""
        return len(shape) == len(self.shape) and all(s is None or s == n for s, n in zip(self.shape, shape))

    def __str__(self) -> str:
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        return f"{self.dtype.name}[{dims}]"


def as_dtype(dtype) -> np.dtype:
    return np.dtype(dtype)


def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """NumPy broadcasting of static shapes; None stays None unless the other side decides it."""
    # fast path, taken by most nodes built: one shape, two equal ones, or one of them 0-d
    if len(shapes) == 1:
        return tuple(shapes[0])
    if len(shapes) == 2:
        a, b = shapes
        if a == b or not b:
            return tuple(a)
        if not a:
            return tuple(b)
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[int | None] = []
    for dims in zip(*padded):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            listed = " and ".join(str(tuple(s)).replace("None", "?") for s in shapes)
            raise ShapeError(f"{op}: operands could not be broadcast together with shapes {listed}")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis, ndim: int, op: str, argument: str = "axis") -> tuple[int, ...]:
    """axis as int, tuple or None -> sorted tuple of non-negative ints; errors name the op."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int | np.integer):
        axes: tuple = (axis,)
    elif isinstance(axis, tuple | list):
        axes = tuple(axis)
    else:
        raise ShapeError(f"{op}: {argument} must be an int, a tuple of ints or None, got {axis!r}")
    result = []
    for a in axes:
        if not isinstance(a, int | np.integer):
            raise ShapeError(f"{op}: {argument} must be an int, a tuple of ints or None, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ShapeError(f"{op}: {argument} {a} is out of range for an array of {ndim} dimensions")
        result.append(int(a) % ndim)
    if len(set(result)) != len(result):
        raise ShapeError(f"{op}: repeated {argument} in {axis!r}")
    return tuple(sorted(result))
