"""Progress on long work: one line on a terminal, rewritten in place; nothing when the stream is not one.

Two shapes of work: counted (`Bar`: the audit's scenarios, the benchmark's cases) and
staged (`Stages`: a compile, whose phases cannot be counted in advance).  Both stay silent
for the first `delay` seconds, so quick work prints nothing at all, and clear their line
when done, so what the command prints afterwards starts on a clean line.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

WIDTH = 79  # one terminal line, the bar and its label


def is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", None) and stream.isatty())


class Bar:
    """`[#########...............] 3/8 W1 1000x1000 f64 · sg numba` on a terminal.

    Call it with the label of each piece of work as it starts (`bar(label)`), or say how far
    along it is (`bar.show(done, label)`); `close()` clears the line.

    >>> import io
    >>> stream = io.StringIO()   # not a terminal: nothing is written
    >>> bar = Bar(total=2, stream=stream)
    >>> bar("W1 · hand NumPy"); bar.close()
    >>> stream.getvalue()
    ''
    """

    def __init__(self, total: int, stream: TextIO | None = None, delay: float = 0.0, width: int = 24):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.done, self.width, self.delay = total, 0, width, delay
        self.started = time.perf_counter()
        self.enabled = is_terminal(self.stream)
        self.shown = False

    def __call__(self, label: str) -> None:
        self.done += 1
        self.show(self.done, label)

    def show(self, done: int, label: str) -> None:
        self.done = done
        if not self.enabled or time.perf_counter() - self.started < self.delay:
            return
        filled = self.width * min(done, self.total) // max(self.total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} {label}"
        self.stream.write("\r" + line[:WIDTH].ljust(WIDTH))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * WIDTH + "\r")
            self.stream.flush()
            self.shown = False


class Stages:
    """`compiling f (numba): generating kernels  3 s` on a terminal, for work that may take long.

    A context manager: a background thread writes the line once `delay` seconds have passed
    and refreshes it while the work goes on; `stage(name)` names the phase now running.

    >>> import io
    >>> with Stages("compiling", stream=io.StringIO()) as stages:
    ...     stages.stage("rewrites")
    >>> stages.current
    'rewrites'
    """

    def __init__(self, what: str, stream: TextIO | None = None, delay: float = 2.0, every: float = 0.5):
        self.stream = sys.stderr if stream is None else stream
        self.what, self.delay, self.every = what, delay, every
        self.current = ""
        self.enabled = is_terminal(self.stream)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def stage(self, name: str) -> None:
        self.current = name

    def __enter__(self) -> Stages:
        self.started = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._refresh, name="stablegrad-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self.stream.write("\r" + " " * WIDTH + "\r")
            self.stream.flush()

    def _refresh(self) -> None:
        if self._done.wait(self.delay):
            return
        while not self._done.is_set():
            elapsed = time.perf_counter() - self.started
            line = f"{self.what}: {self.current}  {elapsed:.0f} s" if self.current else f"{self.what}  {elapsed:.0f} s"
            self.stream.write("\r" + line[:WIDTH].ljust(WIDTH))
            self.stream.flush()
            self._shown = True
            self._done.wait(self.every)
