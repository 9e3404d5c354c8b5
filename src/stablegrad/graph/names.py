"""Named dimensions: the metadata, its checks, and where it is switched off.

A variable's `dims` is None (positional) or one name per axis.  Names are metadata of
the graph the *user* builds: an entrywise op aligns its operands by name (with
positional transposes and new axes, so the graph itself stays positional), and a
reduction's `dim=` becomes an `axis=`.  Everything the library builds on its own —
rewrites, pullbacks, compilation, the bodies of the named functions — runs
`positional()`: names are ignored there, so no rule ever sees a different graph for a
named model than for the same model written with axes.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import ShapeError

Dims = tuple[str, ...]
F = TypeVar("F", bound=Callable[..., Any])

#: how many `positional()` blocks are open, per thread (and task): a compile in one thread must
#: not switch names off for the user code another thread runs
_positional_depth: contextvars.ContextVar[int] = contextvars.ContextVar("positional_depth", default=0)


def active() -> bool:
    """Whether names are honoured here (user code), rather than ignored (library internals)."""
    return _positional_depth.get() == 0


class positional:  # (lower case: it reads as a function, `with positional():`)
    """A block (or, as a decorator, a function) that builds graph by position only.

    Written out rather than with contextlib: its decorator would put a frame of the standard
    library between the user's line and ours, and errors name the first frame outside the
    package (`errors.user_location`).
    """

    def __enter__(self) -> None:
        _positional_depth.set(_positional_depth.get() + 1)

    def __exit__(self, *exc) -> None:
        _positional_depth.set(_positional_depth.get() - 1)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def by_position(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return by_position  # type: ignore[return-value]


def as_dims(dims, ndim: int, op: str) -> Dims | None:
    """`dims` checked: None, or a distinct string per axis."""
    if dims is None:
        return None
    if isinstance(dims, str):
        dims = (dims,)
    dims = tuple(dims)
    if not all(isinstance(d, str) for d in dims):
        raise ShapeError(f"{op}: dims must be strings, got {dims!r}")
    if len(dims) != ndim:
        raise ShapeError(f"{op}: {len(dims)} dims {dims!r} for an array of {ndim} dimensions")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{op}: repeated dim in {dims!r}")
    return dims


def axes_of(op: str, dims: Dims | None, dim) -> tuple[int, ...]:
    """The axes of `dim` (a name or a tuple of names) in `dims`, in the order given."""
    names = (dim,) if isinstance(dim, str) else tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    if dims is None:
        raise ShapeError(
            f"{op}: dim={dim!r} needs named dims, and the tensor has none; "
            "name them with sg.tensor(..., dims=...) or x.rename(...), or give axis="
        )
    for name in names:
        if not isinstance(name, str):
            raise ShapeError(f"{op}: dim must be a name or a tuple of names, got {dim!r}")
        if name not in dims:
            raise ShapeError(f"{op}: no dim {name!r} in {dims!r}")
    if len(set(names)) != len(names):
        raise ShapeError(f"{op}: repeated dim in {dim!r}")
    return tuple(dims.index(name) for name in names)


def union(all_dims: Sequence[Dims]) -> Dims:
    """Every name of `all_dims`, in the order of first appearance."""
    return tuple(dict.fromkeys(name for dims in all_dims for name in dims))


def without(dims: Dims, axes: Sequence[int]) -> Dims:
    return tuple(name for i, name in enumerate(dims) if i not in axes)


def describe(dims: Dims | None, shape: Sequence[int | None]) -> str:
    """`batch=?, class=10` (named) or `?, 10` (positional), as printed in a variable's type."""
    extents = ["?" if n is None else str(n) for n in shape]
    if dims is None:
        return ", ".join(extents)
    return ", ".join(f"{name}={n}" for name, n in zip(dims, extents))
