"""`dim=` for the functions that take an `axis=`, and the names their results carry.

A function wrapped here takes `dim="class"` (or a tuple of names) as an alternative to
`axis=`: the names are looked up in its first operand's dims and passed on as axes, and
the body runs `positional()` (library code, built by position).  Its results carry the
operand's dims less the reduced ones (`reduction`) or all of them (`along_axis`: the
result is shaped like the operand).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ShapeError
from ..graph import names
from ..graph.basic import Variable
from ..graph.types import normalize_axis
from .shape import Transpose


def labelled(v, dims: names.Dims | None, copy: bool = False):
    """`v` carrying `dims`: v itself when it carries no names yet and was just built, else
    (or with `copy`) an identity transpose of it, so that naming a result never renames a
    variable the user already holds.  Anything that is not a variable of that rank is
    returned as is."""
    if dims is None or not isinstance(v, Variable) or v.ndim != len(dims) or v.dims == dims:
        return v
    if copy or v.dims is not None or v.owner is None:
        with names.positional():
            v = Transpose(tuple(range(v.ndim)))(v)
    v.dims = dims
    return v


def _with_dim(fn: Callable, keeps_shape: bool) -> Callable[..., Any]:  # (its signature gains `dim`)
    signature = inspect.signature(fn)
    op = fn.__name__
    operand = next(iter(signature.parameters))

    @functools.wraps(fn)
    def wrapper(*args, dim=None, **kwargs):
        x = args[0] if args else kwargs.get(operand)
        x_dims = x.dims if isinstance(x, Variable) and names.active() else None
        if dim is None and x_dims is None:
            return fn(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        if dim is not None:
            if bound.arguments.get("axis") is not None:
                raise ShapeError(f"{op}: give axis= or dim=, not both")
            axes = names.axes_of(op, getattr(x, "dims", None), dim)
            bound.arguments["axis"] = axes[0] if isinstance(dim, str) else axes
        with names.positional():
            result = fn(*bound.args, **bound.kwargs)
        bound.apply_defaults()
        if keeps_shape or bound.arguments.get("keepdims"):
            out_dims = x_dims
        else:
            axis = bound.arguments["axis"]
            out_dims = names.without(x_dims, normalize_axis(axis, x.ndim, op))  # type: ignore[arg-type]
        if isinstance(result, tuple):  # (value, sign) of logsumexp(..., return_sign=True)
            return tuple(labelled(r, out_dims) for r in result)
        return labelled(result, out_dims)

    parameters = [
        *signature.parameters.values(),
        inspect.Parameter("dim", inspect.Parameter.KEYWORD_ONLY, default=None),
    ]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return wrapper


def reduction(fn: Callable) -> Callable[..., Any]:
    """`fn(x, axis=..., keepdims=...)` also takes `dim=`; its result has x's dims less the reduced ones."""
    return _with_dim(fn, keeps_shape=False)


def along_axis(fn: Callable) -> Callable[..., Any]:
    """`fn(x, axis=...)`, shaped like x, also takes `dim=`; its result has x's dims."""
    return _with_dim(fn, keeps_shape=True)
