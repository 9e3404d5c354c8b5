"""Symbolic inputs: `tensor`, and the `scalar` / `vector` / `matrix` shortcuts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from . import names
from .basic import Variable
from .types import TensorType, as_dtype


def tensor(
    name: str | None = None, shape: Sequence[int | None] = (), dtype="float64", dims: Sequence[str] | None = None
) -> Variable:
    """A symbolic input of the given static shape (None marks an extent known only at run time),
    optionally with a name per axis (`dims`): operands then align by name, and reductions take
    `dim=` (see docs/named-dims.md).

    >>> import stablegrad as sg
    >>> sg.tensor("x", shape=(None, 5))
    <x: float64[?, 5]>
    >>> sg.tensor("x", shape=(None, 5), dims=("batch", "class"))
    <x: float64[batch=?, class=5]>
    """
    shape = tuple(shape)
    for n in shape:
        if n is not None and (not isinstance(n, int | np.integer) or n < 0):
            raise ShapeError(f"tensor: shape entries must be non-negative ints or None, got {shape}")
    dtype = as_dtype(dtype, "tensor")
    v = Variable(TensorType(dtype, tuple(None if n is None else int(n) for n in shape)), name=name)
    v.dims = names.as_dims(dims, len(shape), "tensor")
    return v


def scalar(name: str | None = None, dtype="float64") -> Variable:
    """A 0-d symbolic input."""
    return tensor(name, (), dtype)


def vector(name: str | None = None, dtype="float64", length: int | None = None) -> Variable:
    """A 1-d symbolic input."""
    return tensor(name, (length,), dtype)


def matrix(name: str | None = None, dtype="float64", shape: tuple[int | None, int | None] = (None, None)) -> Variable:
    """A 2-d symbolic input."""
    return tensor(name, shape, dtype)
