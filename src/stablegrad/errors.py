"""Exceptions, and where in the user's code a problem comes from.

Every error names the op, the argument and the user's own source line.  The line is
found by walking up the call stack to the first frame outside this package, which
is cheap enough (about a microsecond) to do for every node that is built.
"""

from __future__ import annotations

import contextlib
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: while a pullback runs, the graph it builds is attributed to the forward node it differentiates
_attributed: list[tuple[str, int] | None] = []


@contextlib.contextmanager
def attributed_to(location: tuple[str, int] | None):
    """Nodes built inside this block record `location` (the user line they stem from) as theirs."""
    _attributed.append(location)
    try:
        yield
    finally:
        _attributed.pop()


def user_location() -> tuple[str, int] | None:
    """(filename, line) of the innermost caller outside stablegrad, or None."""
    if _attributed and _attributed[-1] is not None:
        return _attributed[-1]
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno


def format_location(location: tuple[str, int] | None) -> str:
    if location is None:
        return "<unknown>"
    filename, line = location
    return f"{os.path.basename(filename)}:{line}"


class StableGradError(Exception):
    """Base class of the errors stablegrad raises for user mistakes."""

    def __init__(self, message: str, location: tuple[str, int] | None = None):
        self.location = location if location is not None else user_location()
        self.message = message
        super().__init__(f"{message} (at {format_location(self.location)})")


class ShapeError(StableGradError, ValueError):
    """Incompatible shapes, axes out of range, wrong extents."""


class DTypeError(StableGradError, TypeError):
    """A dtype an op or argument does not accept."""


class GradientError(StableGradError, ValueError):
    """grad() asked for something that has no gradient."""


class InputError(StableGradError, TypeError):
    """A compiled function called with the wrong arguments."""


class ExecutionError(StableGradError, RuntimeError):
    """An op failed while running; names the op and where its node was built."""


class NonFiniteError(StableGradError, FloatingPointError):
    """A node produced inf or NaN from finite operands (`function(..., check_finite=True)`)."""
