"""Named dimensions in user code: entrywise operands aligned by name, and the layout
functions that take names (xarray's `rename`, `transpose(*names)`, `expand_dims`, `isel`,
`dot(..., dim=)`).

Everything here lowers to positional ops (transposes, new axes, indexing, einsum) and
labels the result; the graph the rewrites and backends see has no names in it.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from ..graph import names
from ..graph.basic import Variable
from . import linalg
from .base import as_operands
from .dims import labelled
from .indexing import getitem
from .shape import expand_dims, transpose


def align(op: str, inputs: Sequence[Variable]) -> tuple[list[Variable], names.Dims]:
    """An entrywise op's operands laid out for positional broadcasting by their names, and
    the result's dims (every name, in the order of first appearance).

    Operands without names broadcast by position as NumPy's do, which is unambiguous only
    when every named operand has the same dims (or the unnamed operand is 0-d)."""
    named = list(dict.fromkeys(v.dims for v in inputs if v.dims is not None))
    if len(named) == 1:
        (dims,) = named
        for v in inputs:
            if v.dims is None and v.ndim > len(dims):
                raise ShapeError(
                    f"{op}: an unnamed operand of {v.ndim} dimensions would add unnamed axes to dims {dims!r}; "
                    "name its axes with x.rename((...))"
                )
        return list(inputs), dims
    listed = " and ".join(repr(d) for d in named)
    for v in inputs:
        if v.dims is None and v.ndim:
            raise ShapeError(
                f"{op}: an unnamed operand of shape {v.type.shape} next to operands with different dims "
                f"({listed}) has no unambiguous position; name its axes with x.rename((...))"
            )
    dims = names.union(named)
    _check_extents(op, inputs, dims)
    with names.positional():
        return [v if v.dims is None else _laid_out(v, dims) for v in inputs], dims


def _check_extents(op: str, inputs: Sequence[Variable], dims: names.Dims, broadcasts: bool = True) -> None:
    """Each name has one extent (or, where the op `broadcasts`, that extent and 1)."""
    for name in dims:
        extents = {v.type.shape[v.dims.index(name)] for v in inputs if v.dims is not None and name in v.dims}
        known = sorted(n for n in extents if n is not None and not (broadcasts and n == 1))
        if len(known) > 1:
            raise ShapeError(f"{op}: dim {name!r} has extents {' and '.join(map(str, known))} in different operands")


def _laid_out(v: Variable, dims: names.Dims) -> Variable:
    """v's axes in the order of `dims`, with a length-1 axis for each name v lacks."""
    assert v.dims is not None
    permuted = transpose(v, [v.dims.index(name) for name in dims if name in v.dims])
    missing = tuple(i for i, name in enumerate(dims) if name not in v.dims)
    return expand_dims(permuted, missing) if missing else permuted


def _dims_of(op: str, x: Variable) -> names.Dims:
    if x.dims is None:
        raise ShapeError(
            f"{op}: the tensor has no named dims; name them with sg.tensor(..., dims=...) or x.rename((...))"
        )
    return x.dims


def transpose_dims(x, order: Sequence[str]):
    """x with its axes in the order of the names given (all of them, as xarray's transpose)."""
    (x,) = as_operands(x)
    dims = _dims_of("transpose", x)
    if sorted(order) != sorted(dims) or len(set(order)) != len(order):
        raise ShapeError(f"transpose: {tuple(order)!r} is not an order of the dims {dims!r}")
    with names.positional():
        result = transpose(x, [dims.index(name) for name in order])
    return labelled(result, tuple(order))


def leading(op: str, x: Variable, dim: str) -> Variable:
    """x with the named dim `dim` first (the other dims keep their order)."""
    dims = _dims_of(op, x)
    (axis,) = names.axes_of(op, dims, dim)
    return transpose_dims(x, (dim, *names.without(dims, (axis,))))


def laid_out_like(op: str, v: Variable, like: Variable) -> Variable:
    """v, named, in the axis order of `like` (the same names); anything else as it is."""
    if v.dims is None or like.dims is None or v.dims == like.dims:
        return v
    if sorted(v.dims) != sorted(like.dims):
        raise ShapeError(f"{op}: dims {v.dims!r} where {like.dims!r} were expected")
    return transpose_dims(v, like.dims)


def rename(x, mapping: dict | Sequence[str] | None, renames: dict):
    """x with renamed dims (`mapping` old → new, or keyword arguments), or a positional x named
    (a sequence of one name per axis)."""
    (x,) = as_operands(x)
    if mapping is not None and not isinstance(mapping, dict):
        if renames:
            raise ShapeError("rename: give names for every axis or a mapping, not both")
        return labelled(x, names.as_dims(mapping, x.ndim, "rename"))
    mapping = {**(mapping or {}), **renames}
    dims = _dims_of("rename", x)
    for old in mapping:
        names.axes_of("rename", dims, old)
    return labelled(x, names.as_dims(tuple(mapping.get(d, d) for d in dims), x.ndim, "rename"))


def expand_dim(x, dim: str, axis: int = 0):
    """x with a new length-1 axis called `dim` at position `axis` (xarray's expand_dims)."""
    (x,) = as_operands(x)
    dims = _dims_of("expand_dims", x) if x.ndim else ()
    if not isinstance(dim, str):
        raise ShapeError(f"expand_dims: dim must be a name, got {dim!r}")
    if dim in dims:
        raise ShapeError(f"expand_dims: dim {dim!r} is already in {dims!r}")
    with names.positional():
        result = expand_dims(x, axis)
    position = int(axis) % (x.ndim + 1)
    return labelled(result, (*dims[:position], dim, *dims[position:]))


def isel(x, indexers: dict):
    """x indexed by dim name, each dim on its own (xarray's orthogonal indexing): an int drops
    the dim, a slice or a 1-d integer array keeps it."""
    (x,) = as_operands(x)
    dims = _dims_of("isel", x)
    for name, where in indexers.items():
        (axis,) = names.axes_of("isel", dims, name)
        rank = None if isinstance(where, slice) else (where.ndim if isinstance(where, Variable) else np.ndim(where))
        if rank is not None and rank > 1:
            raise ShapeError(f"isel: the index for {name!r} must be an int, a slice or a 1-d integer array")
        with names.positional():
            x = getitem(x, (slice(None),) * axis + (where,))
        dims = names.without(dims, (axis,)) if rank == 0 else dims
        x = labelled(x, dims)
    return x


def dot(a, b, dim=None):
    """numpy.dot, or with `dim=`: Σ over the named dim(s) of a·b, the other names aligned as in
    `a * b` (xarray.dot).

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.tensor("x", shape=(2, 3), dims=("batch", "k"))
    >>> w = sg.tensor("w", shape=(3,), dims=("k",))
    >>> sg.dot(x, w, dim="k")
    <einsum: float64[batch=2]>
    """
    if dim is None:
        return linalg.dot(a, b)
    a, b = as_operands(a, b)
    a_dims, b_dims = _dims_of("dot", a), _dims_of("dot", b)
    contracted = (dim,) if isinstance(dim, str) else tuple(dim)
    all_dims = names.union([a_dims, b_dims])
    for name in contracted:
        names.axes_of("dot", all_dims, name)
    _check_extents("dot", [a, b], all_dims, broadcasts=False)
    letter = dict(zip(all_dims, string.ascii_letters))
    kept = tuple(name for name in all_dims if name not in contracted)
    spec = (
        f"{''.join(letter[d] for d in a_dims)},{''.join(letter[d] for d in b_dims)}->{''.join(letter[d] for d in kept)}"
    )
    with names.positional():
        result = linalg.Einsum(spec)(a, b)
    return labelled(result, kept)
