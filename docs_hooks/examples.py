"""MkDocs hook: the examples page, with each example's output captured while the site builds.

`docs/examples.md` holds the marker below; this replaces it with, for every
`examples/*.py`: its docstring, the output of running it, and its source.  Each run is
a fresh `python` (the one running MkDocs) from the repository root with `src` first on
PYTHONPATH.  An example that fails, or exits other than as expected, fails the build:
a page of stale or missing output would look just like a good one.
"""

from __future__ import annotations

import ast
import logging
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MARKER = "<!-- examples/*.py, run -->"
TIMEOUT_S = 120
log = logging.getLogger("mkdocs.hooks.examples")


# How an example runs here: (python arguments, expected exit status) for each run.  Not listed: as a
# script, `python examples/NAME.py`, as each docstring says.  hmm.py's full fit takes ~4 s, so it fits
# 300 steps in 40 iterations instead (~1.5 s, still near the truth).  naive_models.py only defines
# models, so its naive mixture is audited, as written (unstable: the audit exits 1) and with recognition on.
def audit(model: str, *flags: str) -> list[str]:
    target = f"examples/naive_models.py:{model}"
    return ["-m", "stablegrad", "audit", target, "--input", "x=float64[4]", "--input", "log_w=float64[3]", *flags]


RUNS: dict[str, list[tuple[list[str], int]]] = {
    "hmm": [
        (
            [
                "-c",
                'import sys; sys.path.insert(0, "examples"); import hmm; '
                "hmm.main(n_states=3, T=300, iterations=40, print_every=10)",
            ],
            0,
        )
    ],
    "naive_models": [
        (audit("mixture_naive", "--no-recognition"), 1),
        (audit("mixture_naive"), 0),
    ],
}


def run(args: list[str], expected: int) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")])))
    command = "python " + shlex.join(args)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise PluginError(f"examples: `{command}` ran past {TIMEOUT_S} s") from exc
    if done.returncode != expected:
        raise PluginError(
            f"examples: `{command}` exited {done.returncode}, expected {expected}\n{done.stdout}{done.stderr}"
        )
    log.info("examples: `%s` ran in %.1f s", command, time.perf_counter() - start)
    return done.stdout


def section(path: Path, runs: list[tuple[list[str], Future[str]]]) -> str:
    source = path.read_text(encoding="utf-8")
    parts = [f"## {path.name}\n", (ast.get_docstring(ast.parse(source)) or "") + "\n"]
    for args, output in runs:
        text = output.result().rstrip() or "(no output)"  # a failed run raises its PluginError here
        parts.append(f"Output of `python {shlex.join(args)}`:\n\n```text\n{text}\n```\n")
    indented = "\n".join(f"    {line}" if line else "" for line in source.rstrip().splitlines())
    parts.append(f'??? example "Source: examples/{path.name}"\n\n    ```python\n{indented}\n    ```\n')
    return "\n".join(parts)


started: dict[Path, list[tuple[list[str], Future[str]]]] = {}


def on_pre_build(**kwargs) -> None:
    # start every run now, so that they overlap with rendering the pages before this one
    pool = ThreadPoolExecutor(max_workers=os.cpu_count())
    started.clear()
    for path in sorted(EXAMPLES.glob("*.py")):
        runs = RUNS.get(path.stem, [([f"examples/{path.name}"], 0)])
        started[path] = [(args, pool.submit(run, args, expected)) for args, expected in runs]
    pool.shutdown(wait=False)


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri != "examples.md":
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/examples.md lost its marker {MARKER!r}")
    return markdown.replace(MARKER, "\n".join(section(path, runs) for path, runs in started.items()))


def on_serve(server, **kwargs):
    server.watch(str(EXAMPLES))  # `mkdocs serve` reruns the examples when one changes
    return server
