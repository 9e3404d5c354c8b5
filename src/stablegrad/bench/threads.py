"""One thread for every system, as far as this process still allows it.

The libraries read their thread settings at different times, so each gets what still works:

- Numba and the OpenMP/MKL runtimes read `NUMBA_NUM_THREADS` / `OMP_NUM_THREADS` /
  `MKL_NUM_THREADS` when they load: set here (unless the user set them) before the
  benchmark imports them.  No kernel timed here is a parallel one anyway.
- XLA reads `XLA_FLAGS` when JAX starts its CPU backend (on the first computation, not
  on `import jax`): `--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`
  is added unless it already names the Eigen setting.  If JAX has started already (the
  benchmark called from a process that used JAX before), the flags cannot apply, and the
  report says so.
- NumPy is imported before any of this (`import stablegrad` imports it), so the
  environment comes too late for its OpenBLAS; its thread pool is resized at run time
  instead, through OpenBLAS's own `openblas_set_num_threads`, and restored afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
from collections.abc import Iterator

ENVIRONMENT = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
XLA_SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
#: the names OpenBLAS builds export (NumPy's wheels bundle a `scipy_openblas64_` build)
_OPENBLAS_SET = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_OPENBLAS_GET = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


@contextlib.contextmanager
def single_threaded() -> Iterator[list[str]]:
    """Limit the libraries to one thread within the block; yields notes on what took effect.

    >>> with single_threaded() as notes:
    ...     pass
    >>> any(note.startswith("XLA_FLAGS") for note in notes)
    True
    """
    saved = {name: os.environ.get(name) for name in (*ENVIRONMENT, "XLA_FLAGS")}
    notes = []
    # a loaded Numba re-reads NUMBA_NUM_THREADS at each compile and refuses a value other
    # than its running pool's: it is asked for one thread at run time instead
    numba = sys.modules.get("numba")
    environment = [name for name in ENVIRONMENT if not (numba is not None and name == "NUMBA_NUM_THREADS")]
    for name in environment:
        if name in os.environ and os.environ[name] != "1":
            notes.append(f"{name}={os.environ[name]} (yours, kept)")
        else:
            os.environ[name] = "1"
    if not notes:
        notes.append(f"{'/'.join(environment)}=1")
    numba_threads = numba.get_num_threads() if numba is not None else None
    if numba is not None:
        numba.set_num_threads(1)
        notes.append("Numba was loaded before: set to 1 thread at run time")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_SINGLE_THREAD}".strip()
    started = _jax_started()
    notes.append(
        f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}"
        + (" (too late: JAX's CPU backend had started in this process)" if started else "")
    )
    blas = _openblas_libraries()
    previous = [(lib, _function(lib, _OPENBLAS_GET)()) for lib in blas]
    for lib in blas:
        _function(lib, _OPENBLAS_SET)(1)
    notes.append(
        f"OpenBLAS resized to 1 thread at run time ({len(blas)} librar{'y' if len(blas) == 1 else 'ies'})"
        if blas
        else "NumPy's BLAS: not resizable at run time here (these workloads make no large BLAS calls)"
    )
    try:
        yield notes
    finally:
        if numba is not None:
            numba.set_num_threads(numba_threads)
        for lib, count in previous:
            _function(lib, _OPENBLAS_SET)(count)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _jax_started() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge  # private, hence the fallback: "not known to have started"

        return bool(xla_bridge.backends_are_initialized())
    except Exception:
        return False


def _openblas_libraries() -> list[ctypes.CDLL]:
    """The OpenBLAS builds loaded in this process (Linux: from /proc/self/maps), as ctypes handles."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({p for p in re.findall(r"(/\S+\.so\S*)", maps.read()) if "openblas" in p.lower()})
    except OSError:
        return []
    libraries = []
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        if all(any(hasattr(library, name) for name in names) for names in (_OPENBLAS_SET, _OPENBLAS_GET)):
            libraries.append(library)
    return libraries


def _function(library: ctypes.CDLL, names: tuple[str, ...]):
    """The first of `names` that `library` exports (the caller checked that one does)."""
    return getattr(library, next(name for name in names if hasattr(library, name)))
