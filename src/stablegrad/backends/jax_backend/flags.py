"""What a traced program reports besides its outputs: doubts and failed checks.

Lowerings call two functions while `Program` traces them:

- `settle(cheap, doubt, exact)`, for a value with a cheap form that is almost always
  exact.  In the program's cheap version the traced boolean array `doubt` is recorded
  and `cheap` kept; a call where any entry of a doubt is true reruns with the exact version,
  compiled on that first need.  So the common call pays neither for the exact form
  nor for a branch (`lax.cond` costs ~0.1 s of XLA compilation and keeps XLA from
  fusing across it).  In the exact version, and in a loop's step, it is `exact()`.
- `check(failed, detail, message)`, for a run-time check on values (labels in
  range).  The program returns the flag and the detail; `Program.run` raises
  `message.format(detail)` with the line of the node that checked.  (`checkify`
  did this before, at ~0.1 s of tracing and compilation per program.)

Checks made inside a loop's step or a batched prologue come out stacked over the
steps, and `restack` reports them again, once, for the whole loop.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp


@dataclass
class Check:
    """One run-time check: `failed` and `detail` are traced; `message` has one `{}` for the detail."""

    failed: Any
    detail: Any
    message: str
    location: tuple[str, int] | None = None


class Flags:
    """The doubts and checks raised while tracing one program (or one loop step)."""

    def __init__(self, speculate: bool):
        self.speculate = speculate
        self.doubts: list = []
        self.checks: list[Check] = []

    def doubt(self):
        """One traced boolean: whether any doubt came true (None if none was raised).

        Doubts of one shape are or-ed entry by entry before one reduction: XLA reduces a
        boolean array in a tree of kernels of its own, and a logsumexp's two doubts (a
        +inf max, a result near 0), both one per row, then cost one tree, not two."""
        if not self.doubts:
            return None
        by_shape: dict[tuple[int, ...], Any] = {}
        for doubt in self.doubts:
            shape = jnp.shape(doubt)
            by_shape[shape] = by_shape[shape] | doubt if shape in by_shape else doubt
        return functools.reduce(operator.or_, (jnp.any(d) for d in by_shape.values()))

    def checked(self) -> list[tuple[Any, Any]]:
        """(failed, detail) of each check: what the traced function returns for them."""
        return [(c.failed, c.detail) for c in self.checks]


_FLAGS: ContextVar[Flags | None] = ContextVar("flags", default=None)


def traced(run: Callable, speculate: bool) -> tuple[Any, Flags]:
    """run()'s result, and the doubts and checks its `settle`s and `check`s raised."""
    token = _FLAGS.set(flags := Flags(speculate))
    try:
        return run(), flags
    finally:
        _FLAGS.reset(token)


def current() -> Flags | None:
    return _FLAGS.get()


def settle(cheap, doubt, exact: Callable):
    """`cheap` with its `doubt` recorded in a speculating program; `exact()` anywhere else."""
    flags = _FLAGS.get()
    if flags is not None and flags.speculate:
        flags.doubts.append(doubt)
        return cheap
    return exact()


def check(failed, detail, message: str, location: tuple[str, int] | None = None) -> None:
    """Report the run-time check `failed` (traced bool) with `detail`, named in `message`."""
    flags = _FLAGS.get()
    if flags is None:
        raise RuntimeError("a run-time check traced outside a program")
    flags.checks.append(Check(failed, detail, message, location))


def restack(checks: list[Check], stacked: list[tuple[Any, Any]]) -> None:
    """Report `checks` made per step (their flags and details stacked along axis 0) once:
    failed at any step, with the detail of the first step that failed."""
    for c, (failed, detail) in zip(checks, stacked):
        check(jnp.any(failed), detail[jnp.argmax(failed)], c.message, c.location)
