"""Generated Numba kernels, compiled once and kept on disk for later processes.

`compiled(source, name)` runs `source` (Python text whose kernels carry
`@numba.njit(cache=True, ...)` and that imports what it needs) and returns its function
`name`.  Numba's `cache=True` keeps the machine code next to the module's file, so the
source is first written to a file in the user's cache directory::

    fn = compiled(
        "import math\\nimport numba\\n\\n"
        "@numba.njit(cache=True)\\n"
        "def kernel(x, out):\\n"
        "    for i in range(x.shape[0]):\\n"
        "        out[i] = math.exp(x[i])\\n",
        "kernel",
    )
    out = np.empty(3)
    fn(np.zeros(3), out)  # compiles in the first process (~0.1 s); later ones load it (~4 ms)

(not a doctest: running it would write to the real user cache.)  The layout::

    ~/.cache/stablegrad/                      $STABLEGRAD_CACHE_DIR, else the platform's cache dir
      stablegrad-0.1.0_numba-0.68.1_numpy-2.4.6_cpython-3.11.7_linux-x86_64/
        k_3f2a…e1.py                          the source, named by its sha256 (truncated)
        __pycache__/
          k_3f2a…e1.kernel-4.py311.nbi        Numba's index: source stamp, signature → data file
          k_3f2a…e1.kernel-4.py311.1.nbc      Numba's machine code for one signature

`STABLEGRAD_CACHE_DIR=off` keeps everything in memory: each process compiles again.

Why each safety measure:

* The directory is named by every version that changes the machine code or the pickles
  Numba stores (stablegrad, Numba, NumPy, Python, OS and machine), so an upgrade never
  reads an entry another version wrote; old directories are merely left behind.  (Numba's
  index also keys each entry by CPU name and features, so a cache dir shared by machines
  of different CPUs is safe within one directory.)
* A source file is published by writing a temporary file in the same directory and
  linking or renaming it into place, both atomic, so a concurrent process sees no file or
  a whole one, never half of one.  An existing correct file is never written again: Numba
  validates its index against the file's stamp (its mtime and size up to Numba 0.67, a
  sha256 of its content since 0.68), and a rewrite would make another process's fresh
  index stale.
* On every load the file must equal the source byte for byte (it is ours, so we can
  compare it with the text in hand: stronger than re-hashing it against its name).  A
  truncated or garbled file is rewritten, with a warning.
* Numba raises, on every later call, when its own `.nbi`/`.nbc` files are truncated or
  garbage (`UnpicklingError`, `EOFError`, LLVM's "bitcode parsing error"); each kernel's
  disk cache is wrapped so that such a load warns, deletes those files and recompiles.
* A cache dir that cannot be created or written (read-only home, a file in the way) is
  one warning and an in-memory compile, never an error.
* Within one process each (source, name) is compiled once and then returned from a dict.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import platform
import re
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba.core import caching
from numba.core.dispatcher import Dispatcher

ENV_VAR = "STABLEGRAD_CACHE_DIR"
_HASH_CHARS = 24  # 96 bits of sha256: a clash only makes two sources take turns rewriting one file

_functions: dict[tuple[str, str], Callable] = {}
_namespaces: dict[str, dict[str, Any]] = {}  # source → its module's globals: one exec per source
_usable_dirs: set[Path] = set()  # entry dirs this process has created and found writable
_warned_dirs: set[Path | str] = set()  # unusable dirs already warned about (one warning each per process)
_lock = threading.Lock()  # two threads asking for one new kernel compile it once


def compiled(source: str, name: str) -> Callable:
    """The function `name` defined by `source` (Python source text whose functions carry
    `@numba.njit(cache=True, ...)` decorators and that imports what it needs itself, e.g.
    `import numba`, `import numpy as np`, `import math`), compiled, with Numba's compiled
    machine code kept on disk so a later process skips the compile.

    `cache=` must be written as a keyword of the decorator call: without a disk cache it is
    removed (see `_in_memory`).  Raises KeyError if the source defines no `name`.
    """
    key = (source, name)
    function = _functions.get(key)
    if function is not None:
        return function
    with _lock:
        if key not in _functions:
            namespace = _namespaces.get(source)
            if namespace is None:
                namespace = _namespaces[source] = _load(source)
            if name not in namespace:
                raise KeyError(f"the kernel source defines no {name!r}")
            _functions[key] = namespace[name]
        return _functions[key]


def clear_memory() -> None:
    """Forget the functions compiled in this process (the disk cache stays): the next
    `compiled` call loads from disk as a fresh process would."""
    with _lock:
        _functions.clear()
        _namespaces.clear()


def cache_dir() -> Path | None:
    """The root of stablegrad's kernel cache, or None when `STABLEGRAD_CACHE_DIR=off`."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(local) / "stablegrad" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "stablegrad"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative path is invalid and to be ignored
    return (Path(xdg) if os.path.isabs(xdg) else home / ".cache") / "stablegrad"


def version_key() -> str:
    """The name of the directory for this installation's entries: every version that can
    change the machine code, or the format of what Numba stores, is part of it."""
    parts = (
        f"stablegrad-{library_version()}",
        f"numba-{numba.__version__}",
        f"numpy-{np.__version__}",
        f"{sys.implementation.name}-{platform.python_version()}",
        f"{sys.platform}-{platform.machine()}",
    )
    return re.sub(r"[^A-Za-z0-9._+-]", "-", "_".join(parts))  # a safe file name whatever the versions say


def library_version() -> str:
    """stablegrad's installed version and a digest of the kernels a generated one calls: Numba's
    cache does not notice a change in a callee's module, so a changed `kernels.py` (a new
    release, or a checkout being edited) must name a new directory."""
    try:
        version = importlib.metadata.version("stablegrad")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        version = "source"
    kernels = Path(__file__).with_name("kernels.py").read_bytes()
    return f"{version}+{hashlib.sha256(kernels).hexdigest()[:12]}"


def _load(source: str) -> dict[str, Any]:
    """The globals of `source` run as a module: from the disk cache if there is one."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:_HASH_CHARS]
    entry = _entry_dir()
    if entry is not None:
        path = entry / f"k_{digest}.py"
        try:
            _publish(path, source.encode())
        except OSError as error:
            _warn_unusable(entry, error)
        else:
            return _from_file(source, path)
    return _in_memory(source, digest)


def _entry_dir() -> Path | None:
    """This installation's directory in the cache, created and found writable, or None."""
    try:
        root = cache_dir()
    except RuntimeError as error:  # Path.home() without $HOME or a password entry
        _warn_unusable("~", error)
        return None
    if root is None:
        return None
    entry = root / version_key()
    if entry in _usable_dirs:
        return entry
    try:
        # Numba puts its files in __pycache__ if it can write there, else in ~/.cache/numba,
        # else refuses `cache=True` with an error; checking it here keeps that error away
        (entry / "__pycache__").mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=entry / "__pycache__").close()
    except OSError as error:
        _warn_unusable(entry, error)
        return None
    _usable_dirs.add(entry)
    return entry


def _publish(path: Path, data: bytes) -> None:
    """Make `path` hold `data`, atomically, without touching it if it already does."""
    try:
        if path.read_bytes() == data:
            return  # the common case: not even its mtime may change (it is Numba's source stamp)
        corrupt = True
    except FileNotFoundError:
        corrupt = False
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        if not corrupt:
            try:
                # a link creates `path` only if it is absent: of two processes publishing at
                # once the first one's file stays, so the index the first one writes stays fresh
                os.link(temporary, path)
                return
            except FileExistsError:
                if path.read_bytes() == data:
                    return
                corrupt = True
            except OSError:
                pass  # a file system without hard links: a rename is atomic too
        if corrupt:
            _warn(f"stablegrad: the cached kernel source {path} was corrupt; rewriting it and recompiling")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _from_file(source: str, path: Path) -> dict[str, Any]:
    """Run the source as the module `path`, which holds it, so that Numba caches beside it."""
    try:
        return _run_module(source, path)
    except Exception as error:
        # a kernel with explicit signatures compiles (and loads its cache) as it is defined
        if not _remove_numba_files(path):
            raise  # nothing of Numba's to blame: the source itself fails
        _warn(f"stablegrad: Numba's cache of {path.name} was unreadable ({_one_line(error)}); deleted it, recompiling")
        return _run_module(source, path)


def _run_module(source: str, path: Path) -> dict[str, Any]:
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    # Numba rebuilds references to a module's globals from sys.modules when it loads a cache
    sys.modules[module.__name__] = module
    # compiled from the text in hand (equal to the file's): no .pyc is written or trusted
    exec(compile(source, str(path), "exec"), module.__dict__)
    for value in list(vars(module).values()):
        if (
            isinstance(value, Dispatcher)
            and value.py_func.__code__.co_filename == str(path)  # not one it imported
            and isinstance(getattr(value, "_cache", None), caching.Cache)
        ):
            value._cache = _HealingCache(value._cache, path)  # type: ignore[attr-defined]
    return module.__dict__


class _HealingCache:
    """A dispatcher's Numba disk cache, on which an unreadable entry is a miss, not an error.

    Numba looks in its cache when a kernel is first called with a signature, and raises if
    the files are truncated or garbage, again on every later call and in every process.
    """

    def __init__(self, cache: caching.Cache, path: Path):
        self._cache = cache
        self._path = path

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return self._cache.load_overload(sig, target_context)
        except Exception as error:
            _remove_numba_files(self._path, Path(self._cache.cache_path))
            _warn(
                f"stablegrad: Numba's cache of {self._path.name} was unreadable ({_one_line(error)}); "
                "deleted it, recompiling"
            )
            return None  # a miss: Numba compiles and saves a fresh index and data file

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            self._cache.save_overload(sig, data)
        except OSError as error:
            # (a full disk, or a directory made read-only since it was checked) Numba raises
            # into the kernel's first call; the machine code it has in memory is still good
            _warn(
                f"stablegrad: could not save Numba's machine code for {self._path.name} ({_one_line(error)}); "
                "later processes will compile it again"
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


def _remove_numba_files(path: Path, *more_dirs: Path) -> bool:
    """Delete Numba's index and data files of the module `path`; whether there were any."""
    dirs = {path.parent / "__pycache__", *more_dirs}
    numba_dir = getattr(numba.config, "CACHE_DIR", "")
    if numba_dir:  # NUMBA_CACHE_DIR moves them there
        dirs.add(Path(numba_dir) / caching._CacheLocator.get_suitable_cache_subpath(str(path)))
    removed = False
    for directory in dirs:
        # the names start with the module's (its hash), so no other source's files match
        for file in [*directory.glob(f"{path.stem}.*.nbi"), *directory.glob(f"{path.stem}.*.nbc")]:
            try:
                file.unlink()
                removed = True
            except FileNotFoundError:
                pass
    return removed


def _in_memory(source: str, digest: str) -> dict[str, Any]:
    """Run the source with no file behind it.

    Numba refuses `cache=True` for a function without a source file, so the keyword is
    removed from every decorator call first.  Editing the parsed tree, not the text, touches
    nothing but those keywords (a regex could not tell a decorator from a string).
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call):
                    decorator.keywords = [k for k in decorator.keywords if k.arg != "cache"]
    namespace: dict[str, Any] = {"__name__": f"k_{digest}"}
    exec(compile(tree, f"<stablegrad kernel k_{digest}>", "exec"), namespace)
    return namespace


def _warn_unusable(entry: Path | str, error: Exception) -> None:
    if entry not in _warned_dirs:
        _warned_dirs.add(entry)
        _warn(
            f"stablegrad: cannot write the kernel cache {entry} ({_one_line(error)}); compiling in memory "
            f"(set {ENV_VAR} to a writable directory, or to 'off')"
        )


_NUMBA_DIR = os.path.dirname(numba.__file__)


def _warn(message: str) -> None:
    """warnings.warn, attributed to the first caller outside this module and Numba (the
    line that called `compiled`, or that first called the kernel)."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2: _warn's caller
    while frame is not None and (
        frame.f_code.co_filename == __file__ or frame.f_code.co_filename.startswith(_NUMBA_DIR)
    ):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: " + " ".join(str(error).split())
