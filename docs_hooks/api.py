"""MkDocs hook: the API reference lists every public name of `stablegrad`, so it cannot drift.

`docs/api.md` holds the marker below; this replaces it with a `::: stablegrad.<name>`
block (mkdocstrings renders the docstring) for each public name, under a heading per
module that defines the names (alphabetical), names in the order the namespace imports
them.  A second name for the same object (`amax` for `max`) gets a line pointing at the
first, not a copy of its docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- the public names of stablegrad, by module -->"
PACKAGE = "stablegrad"
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # document the tree being built, not an installed copy


def public_names(package: types.ModuleType) -> list[str]:
    """`__all__`, or, while the package has none, the names its `__init__` imports under a public name."""
    if hasattr(package, "__all__"):
        return list(package.__all__)
    # not dir(): importing a submodule binds it on the package too (sg.graph, sg.ops), and those are not API
    tree = ast.parse(inspect.getsource(package))
    imported = [a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names]
    return [name for name in imported if not name.startswith("_")]


def entry(package: types.ModuleType, name: str, first: str) -> tuple[str, str]:
    """(the module that defines `name`, its Markdown); `first` is the name the object goes by."""
    obj = getattr(package, name)
    if inspect.ismodule(obj):
        # sg.linalg gathers functions defined elsewhere and says so in __all__; sg.testing: what it defines itself
        own = list(getattr(obj, "__all__", [])) or [
            n for n, v in vars(obj).items() if not n.startswith("_") and getattr(v, "__module__", "") == obj.__name__
        ]
        return obj.__name__, "\n\n".join([inspect.getdoc(obj) or "", *(f"::: {obj.__name__}.{n}" for n in own)])
    if name != first:
        return obj.__module__, f"### {name} {{ #{PACKAGE}.{name} }}\n\nAnother name for [`{first}`][{PACKAGE}.{first}]."
    if sys.modules.get(f"{PACKAGE}.{name}", obj) is not obj:
        # a submodule of the same name (the function sg.audit, the package stablegrad.audit) is what
        # mkdocstrings would find under `stablegrad.<name>`: name the function by its own module
        return obj.__module__, f"::: {obj.__module__}.{name}"
    return obj.__module__, f"::: {PACKAGE}.{name}"


def reference() -> str:
    package = importlib.import_module(PACKAGE)
    names = public_names(package)
    # the name an object goes by: its own `__name__` where that is public, else its first public name
    first: dict[int, str] = {}
    for name in sorted(names, key=lambda n: getattr(getattr(package, n), "__name__", None) != n):
        first.setdefault(id(getattr(package, name)), name)
    by_module: dict[str, list[str]] = {}
    for name in names:
        module, markdown = entry(package, name, first[id(getattr(package, name))])
        by_module.setdefault(module, []).append(markdown)
    parts = []
    for module, entries in sorted(by_module.items()):
        parts.append(f"## {module}")
        if not any(getattr(package, n) is sys.modules[module] for n in names):  # else the entry has the docstring
            parts.append((inspect.getdoc(sys.modules[module]) or "").split("\n\n")[0])
        parts += entries
    return "\n\n".join(parts) + "\n"


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri != "api.md":
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/api.md lost its marker {MARKER!r}: the API reference would be empty")
    return markdown.replace(MARKER, reference())
