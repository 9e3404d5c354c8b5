"""The package imports in one direction: each layer only from the layers below it, and no module
cycle anywhere — module-level and function-local imports alike (read from the source with `ast`).

A lower layer that needs a service from above uses a hook of `graph.hooks`, which the higher
layer fills when it is imported; docs/design.md shows the layers and lists the hooks.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import stablegrad

PACKAGE = Path(stablegrad.__file__).parent

#: lowest first; a module may import from its own layer and the ones before it
LAYERS = ["errors", "graph", "ops", "rewrite", "autodiff", "backends", "compile", "audit", "interop", "api", "cli"]
#: top-level modules and folders of the package, by layer (a new one fails until it is placed here)
PLACES = {
    "errors": "errors",
    "_version": "errors",  # no imports: the bottom layer
    "progress": "errors",  # standard library only
    "graph": "graph",
    "ops": "ops",
    "rewrite": "rewrite",
    "autodiff": "autodiff",
    "backends": "backends",
    "compile": "compile",
    "audit": "audit",
    "jax": "interop",  # stabilize(fn): JAX code imported into our graph, lowered back with our gradients
    "__init__": "api",
    "linalg": "api",  # the sg.linalg namespace: re-exports ops
    "testing": "api",
    "cli": "cli",
    "demo": "cli",
    "bench": "cli",
    "__main__": "cli",
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. "stablegrad.graph.basic"
    target: str  # the imported module
    path: Path
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = ["stablegrad", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports(root: Path) -> tuple[set[str], list[Import]]:
    """Every module of the package under `root`, and every import of one by another."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(f, root) for f in files}
    imports = []
    for path in files:
        source = module_name(path, root)
        package = source if path.name == "__init__.py" else source.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):  # walk: function-local imports too
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    named = ".".join(base + ([node.module] if node.module else []))
                else:
                    named = node.module or ""
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`, the module mod
                targets = [f"{named}.{a.name}" if f"{named}.{a.name}" in modules else named for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target in modules and target != source:
                    imports.append(Import(source, target, path, node.lineno))
    return modules, imports


def layer_of(module: str) -> str:
    parts = module.split(".")
    return PLACES[parts[1] if len(parts) > 1 else "__init__"]


def upward_imports(imports: list[Import]) -> list[str]:
    return [
        f"{i.path}:{i.line}: {i.source} ({layer_of(i.source)}) imports {i.target} ({layer_of(i.target)})"
        for i in imports
        if LAYERS.index(layer_of(i.target)) > LAYERS.index(layer_of(i.source))
    ]


def import_cycle(modules: set[str], imports: list[Import]) -> list[Import] | None:
    """One cycle of imports (each importing the next), or None."""
    edges: dict[str, list[Import]] = {m: [] for m in modules}
    for i in imports:
        edges[i.source].append(i)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(modules):
        if start in state:
            continue
        path: list[Import] = []
        stack = [(start, iter(edges[start]))]
        state[start] = 1
        while stack:
            module, pending = stack[-1]
            step = next(pending, None)
            if step is None:
                state[module] = 2
                stack.pop()
                if path:
                    path.pop()
            elif state.get(step.target) == 1:
                cycle = [*path, step]
                return cycle[next(k for k, i in enumerate(cycle) if i.source == step.target) :]
            elif step.target not in state:
                state[step.target] = 1
                path.append(step)
                stack.append((step.target, iter(edges[step.target])))
    return None


def describe(cycle: list[Import]) -> str:
    return "\n".join(f"{i.path}:{i.line}: {i.source} imports {i.target}" for i in cycle)


# -- the package as it is -----------------------------------------------------------------------------------
def test_every_module_has_a_layer():
    modules, _ = package_imports(PACKAGE)
    unplaced = sorted(m for m in modules if (m.split(".") + ["__init__"])[1] not in PLACES)
    assert not unplaced, f"place these in PLACES (tests/test_layers.py) and in docs/design.md: {unplaced}"


def test_no_layer_imports_from_a_layer_above_it():
    _, imports = package_imports(PACKAGE)
    upward = upward_imports(imports)
    assert not upward, "imports against the layer order (use a hook of graph/hooks.py):\n" + "\n".join(upward)


def test_the_package_has_no_import_cycle():
    modules, imports = package_imports(PACKAGE)
    cycle = import_cycle(modules, imports)
    assert cycle is None, "an import cycle:\n" + describe(cycle or [])


# -- the checks catch what they are for ------------------------------------------------------------------------
@pytest.fixture
def planted(tmp_path):
    """A copy of the package's source, with `plant(file, line)` appending a line to one of its files."""
    root = tmp_path / "stablegrad"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))

    def plant(relative: str, code: str) -> Path:
        path = root / relative
        path.write_text(path.read_text() + code)
        return path

    return root, plant


def test_a_planted_upward_import_inside_a_function_is_reported_with_its_file_and_line(planted):
    root, plant = planted
    path = plant("graph/basic.py", "\n\ndef _planted():\n    from ..compile.function import function\n")
    line = len(path.read_text().splitlines())
    _, imports = package_imports(root)
    assert upward_imports(imports) == [
        f"{path}:{line}: stablegrad.graph.basic (graph) imports stablegrad.compile.function (compile)"
    ]


def test_a_planted_cycle_within_one_layer_is_reported(planted):
    root, plant = planted
    path = plant("ops/base.py", "\n\ndef _planted():\n    from .elementwise import add\n")
    modules, imports = package_imports(root)
    assert not upward_imports(imports)  # within ops: the layer order alone would let it pass
    cycle = import_cycle(modules, imports)
    assert cycle is not None
    assert {i.source for i in cycle} >= {"stablegrad.ops.base", "stablegrad.ops.elementwise"}
    assert any(i.path == path and i.target == "stablegrad.ops.elementwise" for i in cycle)


def test_relative_imports_resolve_to_the_module_they_name(planted):
    root, plant = planted
    plant("ops/stable/xlogy.py", "\nfrom ... import autodiff\nfrom ...graph import hooks\nfrom ..math import log\n")
    _, imports = package_imports(root)
    targets = {i.target for i in imports if i.source == "stablegrad.ops.stable.xlogy"}
    assert {"stablegrad.autodiff", "stablegrad.graph.hooks", "stablegrad.ops.math"} <= targets
