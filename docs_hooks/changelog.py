"""MkDocs hook: the changelog page is CHANGELOG.md at the repository root, included, not copied.

`docs/changelog.md` holds only the marker below, so the text has one home: the file
that packaging and readers of the repository see.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.exceptions import PluginError

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"
MARKER = "<!-- CHANGELOG.md -->"


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri != "changelog.md":
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/changelog.md lost its marker {MARKER!r}")
    return markdown.replace(MARKER, CHANGELOG.read_text(encoding="utf-8"))


def on_serve(server, **kwargs):
    server.watch(str(CHANGELOG))  # `mkdocs serve` rebuilds when the changelog changes
    return server
