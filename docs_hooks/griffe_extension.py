"""Griffe extension for the API reference (mkdocs.yml loads it into mkdocstrings).

- Doctests become `pycon` code blocks.  The docstrings are plain prose plus doctests,
  which Markdown would read as nested block quotes (`>>>`).  A run of doctest lines (a
  `>>>` line up to the next blank line) is fenced, without its `# doctest:` directives,
  which are for pytest, not readers.
- An attribute inspected at run time gets its value's docstring (`seconds = 0.0`: float's
  "Convert a string or number to a floating point number"); that one is dropped.
- Functions made by a factory (`abs = _unary(Abs())`) keep the factory's `__qualname__`
  (`_unary.<locals>.apply`), which no module path reaches; `stablegrad.abs` is pointed
  at the name the defining module binds instead (`stablegrad.ops.elementwise.abs`).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# mkdocstrings imports every submodule to inspect it.  Skipped (the loader matches a submodule's own
# name): the `python -m` entry points, which would run their command line on import, and the optional
# backends, which define no public names and import JAX and Numba (seconds).
griffe.GriffeLoader.ignored_modules |= {"__main__", "jax_backend", "numba_backend"}
DIRECTIVE = re.compile(r"\s*#\s*doctest:.*$")


def fence_doctests(text: str) -> str:
    out: list[str] = []
    indent = None  # the indentation of the open block's `>>>`; None outside a block
    for line in text.splitlines():
        if indent is None and line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
        elif indent is not None and not line.strip():
            out.append(f"{indent}```")
            indent = None
        out.append(DIRECTIVE.sub("", line) if indent is not None else line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class StablegradDocs(griffe.Extension):
    def on_instance(self, *, node: Any, obj: griffe.Object, **kwargs: Any) -> None:
        inspected = isinstance(node, griffe.ObjectNode)  # else read from the source, docstrings as written
        if inspected and obj.is_attribute and obj.docstring and node.obj.__doc__ == type(node.obj).__doc__:
            obj.docstring = None
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)

    def on_alias_instance(self, *, alias: griffe.Alias, node: griffe.ObjectNode, **kwargs: Any) -> None:
        if "<locals>" in alias.target_path:
            alias.target_path = f"{getattr(node.obj, alias.name).__module__}.{alias.name}"
