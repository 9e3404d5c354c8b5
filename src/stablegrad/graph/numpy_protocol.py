"""NumPy's dispatch protocols on symbolic tensors: `np.exp(x)`, `np.sum(x, axis=0)`, `x0 + x`.

NumPy hands a call on one of our tensors to the tensor (NEP 13 `__array_ufunc__` for ufuncs,
NEP 18 `__array_function__` for the rest), which answers with the `sg.` function of the same
name, so a model written with `np.*` calls builds a graph unchanged, as it would trace under
JAX.  A NumPy function we have no counterpart for raises an error naming it, and
`np.asarray(x)` raises one saying how to get values: without them NumPy would quietly build
an object array of tensors.

The functions come from the public namespace (`graph.hooks.public_api`): this module sits in
the graph layer, below the ops it dispatches to.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import StableGradError
from . import hooks


class NumPyProtocolError(StableGradError, TypeError):
    """A NumPy function or form of call that has no symbolic counterpart."""


#: NumPy names that stablegrad spells otherwise
RENAMED = {
    "absolute": "abs",
    "true_divide": "divide",
    "remainder": "mod",
    "conjugate": "conj",
    "amax": "max",
    "amin": "min",
    "bitwise_not": "invert",
}
#: `np.<ufunc>.reduce` and `.accumulate` as the reductions they are
REDUCE = {
    "add": "sum",
    "multiply": "prod",
    "maximum": "max",
    "minimum": "min",
    "logical_and": "all",
    "logical_or": "any",
    "logaddexp": "logsumexp",
}
ACCUMULATE = {"add": "cumsum", "multiply": "cumprod", "logaddexp": "logcumsumexp"}
#: NumPy functions that read a tensor's static facts rather than compute
FACTS = {"shape": lambda x: x.shape, "ndim": lambda x: x.ndim}
#: libraries whose frames stand between the user's call and a conversion to an array
LIBRARIES = {"numpy", "scipy"}
#: NumPy submodules whose functions dispatch to the namespace of the same name (`np.linalg.slogdet`)
SUBMODULES = {"numpy.linalg": "linalg"}


def array_ufunc(tensor, ufunc: np.ufunc, method: str, *inputs, **kwargs):
    """`Variable.__array_ufunc__`: `np.exp(x)`, `ndarray + x`, `np.add.reduce(x, axis=0)`."""
    name = ufunc.__name__
    out = kwargs.pop("out", None)
    if out is not None:
        raise NumPyProtocolError(f"np.{name}: out= cannot write into a symbolic tensor; use the returned tensor")
    if method == "__call__":
        dtype = kwargs.pop("dtype", None)
        _no_other_arguments(f"np.{name}", kwargs)
        if dtype is not None:  # NumPy computes in `dtype`: the operands are cast first
            inputs = tuple(i.astype(dtype) if hasattr(i, "astype") else np.asarray(i, dtype) for i in inputs)
        return _function(f"np.{name}", RENAMED.get(name, name))(*inputs)
    table = {"reduce": REDUCE, "accumulate": ACCUMULATE}.get(method, {})
    if name not in table:
        raise NumPyProtocolError(f"np.{name}.{method} has no symbolic counterpart in stablegrad")
    (x,) = inputs
    fn = _function(f"np.{name}.{method}", table[name])
    axis = kwargs.pop("axis", 0)
    if method == "reduce":
        keepdims = kwargs.pop("keepdims", False)
        _no_other_arguments(f"np.{name}.{method}", kwargs)
        return fn(x, axis=axis, keepdims=keepdims)
    _no_other_arguments(f"np.{name}.{method}", kwargs)
    return fn(x, axis=axis)


def array_function(tensor, func: Callable, types, args, kwargs):
    """`Variable.__array_function__`: `np.sum(x, axis=0)`, `np.where(m, a, b)`, `np.linalg.slogdet(a)`."""
    module = getattr(func, "__module__", "") or ""
    name = func.__name__
    shown = f"{'np' if module == 'numpy' else module.replace('numpy', 'np')}.{name}"
    if module == "numpy" and name in FACTS and len(args) == 1 and not kwargs:
        return FACTS[name](args[0])
    namespace: Any = hooks.public_api.get()
    if module in SUBMODULES:
        namespace = getattr(namespace, SUBMODULES[module], None)
    elif module != "numpy":
        namespace = None
    fn = getattr(namespace, RENAMED.get(name, name), None) if namespace is not None else None
    if not callable(fn):
        raise NumPyProtocolError(f"{shown} has no symbolic counterpart in stablegrad (called on a symbolic tensor)")
    return fn(*args, **kwargs)


def no_array(tensor, dtype=None, copy=None):
    """`Variable.__array__`: a symbolic tensor has no values to convert."""
    caller, location = _library_caller()
    raise NumPyProtocolError(
        f"{_call_instead(caller, 'converts its argument to a NumPy array')}a symbolic tensor ({tensor}) has no "
        "values to convert to a NumPy array; compute them with .eval() or sg.function(inputs, outputs)",
        location=location,
    )


def no_namespace(tensor, api_version=None):
    """`Variable.__array_namespace__`: there is none to offer.

    SciPy's array-API path (`SCIPY_ARRAY_API=1`) asks for it, and its functions then update
    arrays in place (`x[i] = y`), which a symbolic tensor cannot be.  Without this answer,
    SciPy would fall back to converting the tensor, fail, and say only that the argument
    is "neither array API compatible nor coercible by NumPy".
    """
    caller, location = _library_caller()
    raise NumPyProtocolError(
        f"{_call_instead(caller, 'asks for an array-API namespace')}a symbolic tensor ({tensor}) has none: "
        "array-API code updates arrays in place; NumPy's functions and ufuncs build graph on tensors",
        location=location,
    )


def _call_instead(caller: tuple[str, str] | None, what: str) -> str:
    """'scipy.special.logsumexp <what>; call sg.logsumexp instead; ', or '' outside a library call."""
    if caller is None:
        return ""
    module, name = caller
    fn = getattr(hooks.public_api.get(), name, None)
    return f"{module}.{name} {what}" + (f"; call sg.{name} instead" if callable(fn) else "") + "; "


def _library_caller() -> tuple[tuple[str, str] | None, tuple[str, int] | None]:
    """The outermost NumPy/SciPy function on the stack (module, name), and the user's line above it."""
    frame = sys._getframe(2)
    caller = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in LIBRARIES:
            return caller, (frame.f_code.co_filename, frame.f_lineno)
        public = module.split("._")[0]  # scipy.special._logsumexp → scipy.special
        caller = (public, frame.f_code.co_name)
        frame = frame.f_back  # type: ignore[assignment]
    return caller, None


def _function(shown: str, name: str) -> Callable:
    fn = getattr(hooks.public_api.get(), name, None)
    if not callable(fn):
        raise NumPyProtocolError(f"{shown} has no symbolic counterpart in stablegrad (called on a symbolic tensor)")
    return fn


def _no_other_arguments(shown: str, kwargs: dict) -> None:
    if kwargs:
        raise NumPyProtocolError(f"{shown}: {', '.join(sorted(kwargs))}= not supported on symbolic tensors")
