"""Backends: where a prepared graph runs (`interface.py` says what a backend is).

This is the one table from `backend="..."` to an implementation.  NumPy is the default
and always loaded; the others (JAX, Numba) are imported on first use, so the core never imports JAX.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import StableGradError
from . import numpy_backend
from .interface import Backend, Options, Program


@dataclass(frozen=True)
class Optional:
    """A backend in an optional extra: its module (which defines `BACKEND`), what it needs, the extra."""

    module: str
    needs: str
    extra: str


#: backend name → its implementation
BACKENDS: dict[str, Backend | Optional] = {
    "numpy": numpy_backend.BACKEND,
    "jax": Optional("stablegrad.backends.jax_backend", "JAX", "jax"),
    "numba": Optional("stablegrad.backends.numba_backend", "Numba", "numba"),
}


def backend(name: str) -> Backend:
    """The backend called `name`, imported if need be; an error naming the extra that installs it."""
    entry = BACKENDS.get(name)
    if entry is None:
        available = ", ".join(repr(n) for n in BACKENDS)
        raise StableGradError(f"function: unknown backend {name!r} (available: {available})")
    if not isinstance(entry, Optional):
        return entry
    try:
        return importlib.import_module(entry.module).BACKEND
    except ImportError as exc:
        raise StableGradError(
            f"function: backend={name!r} needs {entry.needs}, which is not installed ({exc}); "
            f"pip install 'stablegrad[{entry.extra}]'"
        ) from exc


__all__ = ["BACKENDS", "Backend", "Optional", "Options", "Program", "backend"]
