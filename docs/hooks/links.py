"""mkdocs hook: the decision records, listed and in the navigation, from docs/decisions/.

A new record (`docs/decisions/NNNN-title.md`) needs no edit anywhere else: it is added to the
navigation under "Decisions" and to the index page (`<!-- generated: decisions -->` in
docs/decisions/index.md), titled by its first heading. A link to the folder itself
(`decisions/`, which a forge shows as a file list) is sent to that index page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

DOCS = Path(__file__).resolve().parents[1]
DECISIONS = DOCS / "decisions"
MARKER = "<!-- generated: decisions -->"
SECTION = "Decisions"
# `](decisions/)` or `](../decisions/)`: a link to the folder rather than to a page.
FOLDER_LINK = re.compile(r"\]\(((?:\.\./)*decisions)/\)")


def records() -> list[tuple[str, str]]:
    """(path under docs/, title) of every record, in number order."""
    out = []
    for path in sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md")):
        first = path.read_text(encoding="utf-8").lstrip().splitlines()[0]
        out.append((f"decisions/{path.name}", first.lstrip("#").strip()))
    return out


def _with_records(nav: Any) -> Any:
    """The nav with the Decisions entry expanded into the index and every record."""
    if isinstance(nav, list):
        return [_with_records(item) for item in nav]
    if isinstance(nav, dict):
        out = {}
        for title, value in nav.items():
            entry = value
            if title == SECTION and value == "decisions/index.md":
                entry = [{"Index": value}, *({t: p} for p, t in records())]
            out[title] = _with_records(entry)
        return out
    return nav


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    config.nav = _with_records(config.nav)
    return config


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    markdown = FOLDER_LINK.sub(r"](\1/index.md)", markdown)
    if MARKER in markdown:
        listing = [f"- [{title}]({Path(path).name})" for path, title in records()]
        markdown = markdown.replace(MARKER, "\n".join(listing))
    return markdown
