"""The on-disk cache of generated Numba kernels (numba_backend/cache.py): where entries live,
that a version change or a corrupt file is never read, that concurrent processes publish
safely, and that a later process loads without compiling (Numba's dispatcher counts it)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

import stablegrad
from stablegrad.backends.numba_backend import cache  # (needs numba)

SOURCE = """\
import math

import numba


@numba.njit(cache=True)
def kernel(x, y, out):
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = math.exp(x[i, j] - y[i])


@numba.njit(cache=True)
def other(x, y, out):
    kernel(x, y, out)
"""

# compiled as it is defined: its cache is read inside `compiled`, not at the first call
EAGER = SOURCE.replace("@numba.njit(cache=True)", '@numba.njit("void(f8[:, :], f8[:], f8[:, :])", cache=True)')


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch) -> Path:
    """Every test has its own cache dir (never the user's) and starts as a fresh process would."""
    root = tmp_path / "cache"
    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", str(root))
    cache.clear_memory()
    yield root
    cache.clear_memory()


def run(fn) -> tuple[int, int]:
    """Call the kernel, check its numbers; (cache hits, cache misses) of its dispatcher."""
    x, y = np.linspace(-2.0, 2.0, 12).reshape(3, 4), np.array([0.5, -1.0, 2.0])
    out = np.full_like(x, np.nan)
    fn(x, y, out)
    np.testing.assert_allclose(out, np.exp(x - y[:, None]), rtol=1e-15)
    stats = fn.stats
    return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())


def entry(root: Path, source: str = SOURCE) -> Path:
    return root / cache.version_key() / f"k_{hashlib.sha256(source.encode()).hexdigest()[:24]}.py"


def numba_files(root: Path, suffix: str) -> list[Path]:
    return sorted((root / cache.version_key() / "__pycache__").glob(f"k_*.kernel-*.{suffix}"))


# -- 1. location ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "platform, env, expected",
    [
        ("linux", {}, "HOME/.cache/stablegrad"),
        ("linux", {"XDG_CACHE_HOME": "XDG"}, "XDG/stablegrad"),
        ("linux", {"XDG_CACHE_HOME": "relative/is/ignored"}, "HOME/.cache/stablegrad"),
        ("darwin", {"XDG_CACHE_HOME": "XDG"}, "HOME/Library/Caches/stablegrad"),
        ("win32", {"LOCALAPPDATA": "LOCAL"}, "LOCAL/stablegrad/Cache"),
        ("win32", {}, "HOME/AppData/Local/stablegrad/Cache"),
        ("linux", {"STABLEGRAD_CACHE_DIR": "MINE"}, "MINE"),
        ("win32", {"STABLEGRAD_CACHE_DIR": "MINE"}, "MINE"),
        ("linux", {"STABLEGRAD_CACHE_DIR": "off"}, None),
        ("darwin", {"STABLEGRAD_CACHE_DIR": "OFF"}, None),
    ],
)
def test_the_cache_dir_is_the_env_var_or_the_platforms_user_cache(tmp_path, monkeypatch, platform, env, expected):
    places = {
        "HOME": tmp_path / "home",
        "XDG": tmp_path / "xdg",
        "LOCAL": tmp_path / "local",
        "MINE": tmp_path / "mine",
    }
    for var in ("STABLEGRAD_CACHE_DIR", "XDG_CACHE_HOME", "LOCALAPPDATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(places["HOME"]))
    for var, value in env.items():
        monkeypatch.setenv(var, str(places.get(value, value)))
    monkeypatch.setattr(sys, "platform", platform)
    if expected is None:
        assert cache.cache_dir() is None
    else:
        first, *rest = expected.split("/")
        assert cache.cache_dir() == places[first].joinpath(*rest)


def test_off_compiles_in_memory_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", "off")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for source in (SOURCE, EAGER):  # cache=True would fail without a file: it is taken out
        fn = cache.compiled(source, "kernel")
        assert run(fn) == (0, 1)
        assert fn.stats.cache_path is None  # Numba's no-cache
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("obstacle", ["a file where a directory must be", "a read-only directory"])
def test_a_cache_dir_that_cannot_be_written_is_a_warning_and_an_in_memory_compile(tmp_path, monkeypatch, obstacle):
    if obstacle == "a file where a directory must be":
        (tmp_path / "home").write_text("")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes to read-only directories")
        (tmp_path / "home").mkdir(mode=0o500)
    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", str(tmp_path / "home" / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write the kernel cache .* compiling in memory"):
        fn = cache.compiled(SOURCE, "kernel")
    assert run(fn) == (0, 1)
    assert fn.stats.cache_path is None
    cache.clear_memory()
    run(cache.compiled(SOURCE, "kernel"))  # one warning per directory and process: this one is silent


# -- 2. key -------------------------------------------------------------------------------


def test_an_entry_is_the_source_named_by_its_hash_in_a_directory_named_by_the_versions(root):
    assert run(cache.compiled(SOURCE, "kernel")) == (0, 1)
    key = cache.version_key()
    for part in (stablegrad.__version__, cache.numba.__version__, np.__version__, sys.version.split()[0]):
        assert part in key
    assert cache.library_version() in key  # which also names the kernels generated code calls
    assert entry(root).read_text() == SOURCE
    assert [p.name for p in (root / key).iterdir() if p.is_file()] == [entry(root).name]  # no temporary left
    assert numba_files(root, "nbi") and numba_files(root, "nbc")  # Numba's, in __pycache__ beside it


@pytest.mark.parametrize("changed", ["stablegrad", "numpy"])
def test_a_version_change_never_reads_an_old_entry(root, monkeypatch, changed):
    assert run(cache.compiled(SOURCE, "kernel")) == (0, 1)
    old_dir = root / cache.version_key()
    old_files = {p: p.stat().st_mtime_ns for p in old_dir.rglob("*")}
    if changed == "stablegrad":  # a new release, or an edited kernels.py
        monkeypatch.setattr(cache, "library_version", lambda: "99.0")
    else:
        monkeypatch.setattr(np, "__version__", "99.0")
    cache.clear_memory()
    assert run(cache.compiled(SOURCE, "kernel")) == (0, 1)  # compiled afresh
    assert "99.0" in cache.version_key()
    assert sorted(p.name for p in root.iterdir()) == sorted([old_dir.name, cache.version_key()])
    assert {p: p.stat().st_mtime_ns for p in old_dir.rglob("*")} == old_files  # the old entry is left as it was


# -- 3. publication and later processes --------------------------------------------------


def test_a_later_load_reads_numbas_cache_and_does_not_rewrite_the_source(root):
    assert run(cache.compiled(SOURCE, "kernel")) == (0, 1)
    before = entry(root).stat()
    cache.clear_memory()
    assert run(cache.compiled(SOURCE, "kernel")) == (1, 0)
    after = entry(root).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # Numba's stamp untouched


WORKER = """\
import json, sys, time
from pathlib import Path

import numpy as np
import numba  # before the barrier: both processes then compile at the same moment

from stablegrad.backends.numba_backend import cache

barrier, me, count, source = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]).read_text()
(barrier / me).touch()
while len(list(barrier.iterdir())) < count:
    time.sleep(0.0005)
fn = cache.compiled(source, "kernel")
x, y = np.linspace(-2.0, 2.0, 12).reshape(3, 4), np.array([0.5, -1.0, 2.0])
out = np.empty_like(x)
fn(x, y, out)
stats = fn.stats
print(json.dumps({
    "right": bool(np.allclose(out, np.exp(x - y[:, None]), rtol=1e-15, atol=0)),
    "hits": sum(stats.cache_hits.values()),
    "misses": sum(stats.cache_misses.values()),
}))
"""


def _processes(tmp_path: Path, count: int, name: str) -> list[dict]:
    barrier = tmp_path / f"barrier-{name}"
    barrier.mkdir()
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "source.py").write_text(SOURCE)
    env = {**os.environ, "PYTHONPATH": str(Path(stablegrad.__file__).parents[1])}  # and STABLEGRAD_CACHE_DIR
    started = [
        subprocess.Popen(  # -W error: a warning (a corrupt or clobbered file) fails the worker
            [sys.executable, "-W", "error", str(tmp_path / "worker.py"), str(barrier), str(i), str(count)]
            + [str(tmp_path / "source.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    results = []
    for process in started:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_processes_compiling_one_new_source_at_once_agree_and_a_third_loads_without_compiling(tmp_path, root):
    both = _processes(tmp_path, 2, "together")
    assert all(r["right"] and r["hits"] + r["misses"] == 1 for r in both), both
    assert entry(root).read_text() == SOURCE
    [third] = _processes(tmp_path, 1, "later")
    assert third == {"right": True, "hits": 1, "misses": 0}


# -- 4. corruption -------------------------------------------------------------------------


def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(len(data)))
    else:  # bits flipped in the middle: still a pickle, but LLVM cannot parse the code in it
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 256]) + data[middle + 256 :])


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_a_corrupt_source_file_is_rewritten_with_a_warning(root, how):
    run(cache.compiled(SOURCE, "kernel"))
    _corrupt(entry(root), how)
    cache.clear_memory()
    with pytest.warns(RuntimeWarning, match="kernel source .* was corrupt"):
        fn = cache.compiled(SOURCE, "kernel")
    run(fn)
    assert entry(root).read_text() == SOURCE
    cache.clear_memory()
    assert run(cache.compiled(SOURCE, "kernel")) == (1, 0)  # and Numba's cache serves the mended file


@pytest.mark.parametrize(
    "suffix, how",
    [("nbi", "truncated"), ("nbi", "garbage"), ("nbi", "empty"), ("nbc", "truncated"), ("nbc", "garbage")]
    + [("nbc", "flipped")],
)
def test_corrupt_numba_cache_files_are_deleted_and_recompiled_with_a_warning(root, suffix, how):
    run(cache.compiled(SOURCE, "kernel"))
    for path in numba_files(root, suffix):
        _corrupt(path, how)
    cache.clear_memory()
    fn = cache.compiled(SOURCE, "kernel")
    with pytest.warns(RuntimeWarning, match=r"Numba's cache of k_\w+\.py was unreadable"):
        assert run(fn) == (0, 1)  # (Numba itself would raise here, and on every later call)
    cache.clear_memory()
    assert run(cache.compiled(SOURCE, "kernel")) == (1, 0)  # the fresh files serve the next process


def test_corrupt_numba_files_of_a_kernel_compiled_as_it_is_defined_are_recompiled(root):
    run(cache.compiled(EAGER, "kernel"))
    for path in numba_files(root, "nbi"):
        _corrupt(path, "garbage")
    cache.clear_memory()
    with pytest.warns(RuntimeWarning, match="was unreadable"):
        fn = cache.compiled(EAGER, "kernel")
    assert run(fn) == (0, 1)  # recompiled inside `compiled`, as the kernel was defined
    cache.clear_memory()
    assert run(cache.compiled(EAGER, "kernel")) == (1, 0)


# -- 5. memory ------------------------------------------------------------------------------


def test_a_process_compiles_each_source_once(root):
    fn = cache.compiled(SOURCE, "kernel")
    assert cache.compiled(SOURCE, "kernel") is fn
    other = cache.compiled(SOURCE, "other")
    assert other.py_func.__globals__ is fn.py_func.__globals__  # one module per source
    assert run(other) == (0, 1)
    with pytest.raises(KeyError, match="defines no 'missing'"):
        cache.compiled(SOURCE, "missing")


def test_a_failure_to_save_numbas_files_is_a_warning_and_the_kernel_still_runs(root, monkeypatch):
    from numba.core import caching

    def full_disk(self, *args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(caching.IndexDataCacheFile, "save", full_disk)
    fn = cache.compiled(SOURCE, "kernel")
    with pytest.warns(RuntimeWarning, match="could not save Numba's machine code .* No space left"):
        assert run(fn) == (0, 1)
