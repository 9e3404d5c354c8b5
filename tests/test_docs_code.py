"""The documentation's code runs, and the site builds.

Every ```python block of `docs/*.md` and `README.md` runs, the blocks of one file in order
in one namespace, as a reader following along would run them, with `np` (NumPy) and `sg`
(stablegrad) already imported and the repository root as the working directory.  A block
that is deliberately not runnable (pseudo-code, or code that needs a file the reader
would have) says so in its fence, ```python {.no-run}, with a sentence next to it saying
why; MkDocs renders it as any other block (a bare ```python no-run would not be read as a
fence at all).  A block that needs an optional extra that is not installed (JAX, Numba)
skips the rest of its page.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import traceback
import types
from pathlib import Path

import numpy as np
import pytest

import stablegrad as sg

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^(?P<indent>[ ]*)```python(?P<info>[^\n]*)\n(?P<code>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
NO_RUN = "{.no-run}"
EXTRAS = {
    "jax",
    "jaxlib",
    "numba",
    "mpmath",
    "matplotlib",
    "ml_dtypes",
}  # what a block may need that `pip install .` lacks


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line number of the first line of code, fence info, code) of each ```python block."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        found.append((line, match["info"].strip(), textwrap.dedent(match["code"])))
    return found


def needs_missing_extra(error: BaseException) -> str | None:
    """The optional module whose absence caused `error` (sg.function wraps the ImportError), if any."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in EXTRAS:
            return error.name
        error = error.__cause__
    return None


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_the_python_blocks_of_a_page_run_in_order(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    name = page.relative_to(ROOT).as_posix()
    namespace = {"__name__": "__main__", "np": np, "sg": sg}
    for line, info, code in blocks(page):
        if info == NO_RUN:
            continue
        assert not info, f"{name}:{line}: unknown fence info {info!r}; the only one is {NO_RUN!r}"
        first = (code.strip().splitlines() or [""])[0].split("  #")[0].rstrip()  # its code, without a trailing comment
        try:
            # padded so that a traceback's line numbers are the page's
            exec(compile("\n" * (line - 1) + code, name, "exec"), namespace)
        except Exception as error:
            if missing := needs_missing_extra(error):
                pytest.skip(f"{name}:{line} needs {missing}, an optional extra that is not installed")
            pytest.fail(f"{name}:{line}: the block starting `{first}` fails:\n{traceback.format_exc()}")


def test_the_site_builds_without_a_warning(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    # the generated pages: an entry for every public function and class, and every example's output
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    names = [n for n in dir(sg) if not n.startswith("_") and not isinstance(getattr(sg, n), types.ModuleType)]
    missing = [n for n in names if not re.search(rf'id="stablegrad(\.\w+)*\.{n}"', api)]
    assert not missing, f"no entry in the API reference for {missing}"
    examples = (site / "examples" / "index.html").read_text(encoding="utf-8")
    for example in sorted((ROOT / "examples").glob("*.py")):
        assert f"Source: examples/{example.name}" in examples, example.name
    assert "relative difference" in examples  # the last line hmm.py prints: its output is there, not only its source
