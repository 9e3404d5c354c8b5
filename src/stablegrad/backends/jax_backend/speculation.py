"""Values with a cheap form that is almost always exact: run it, rerun exactly when in doubt.

A lowering calls `settle(cheap, doubt, exact)`.  While `Program` traces its cheap
program (under a `Speculation`), the traced boolean `doubt` is recorded and
`cheap` kept; the program returns whether any doubt came true, and only then
reruns the call with its exact program, compiled on that first need.  Anywhere
else (the exact program, a loop's step, whose doubts could not leave it) `settle`
is `exact()`.  So the common call pays neither for the exact form nor for a
branch: `lax.cond` costs ~0.1 s of XLA compilation and keeps XLA from fusing
across it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import jax.numpy as jnp


class Speculation:
    """The doubts raised while tracing a program's cheap form, as traced booleans."""

    def __init__(self):
        self.doubts: list = []

    def any(self):
        """One traced boolean: whether any doubt came true (None if none was raised)."""
        return jnp.any(jnp.stack(self.doubts)) if self.doubts else None


#: `settling(EXACT)`: every `settle` takes its exact form
EXACT = "exact"
_SETTLING: ContextVar[Speculation | str] = ContextVar("settling", default=EXACT)


@contextmanager
def settling(how: Speculation | str) -> Iterator[None]:
    """Trace with `settle` answering this way: a Speculation (cheap, doubt recorded) or EXACT."""
    token = _SETTLING.set(how)
    try:
        yield
    finally:
        _SETTLING.reset(token)


def settle(cheap, doubt, exact: Callable):
    """`cheap` with its `doubt` recorded under a Speculation; otherwise `exact()`."""
    how = _SETTLING.get()
    if isinstance(how, Speculation):
        how.doubts.append(doubt)
        return cheap
    return exact()
