"""mkdocs hook: configuration tables rendered from issuance.environment at build time.

`<!-- environment: all -->` (docs/configuration.md) becomes every registered variable, one
table per group; `<!-- environment: NAME NAME … -->` on a topic page becomes a table of those
variables, each linked to its row in the reference. The registry is what console/settings.py
reads, so the defaults shown here are the ones the code uses.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- environment: ([A-Za-z0-9_ ]+) -->")
REFERENCE = "configuration.md"


def registry() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from issuance import environment

    return environment


def cell(text: str) -> str:
    # A pipe would end the table cell.
    return text.replace("|", "\\|")


def table(variables: Iterable[Any], link: str | None) -> list[str]:
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for variable in variables:
        if link is None:
            name = f'<span id="{variable.name}"></span>`{variable.name}`'
        else:
            name = f"[`{variable.name}`]({link}#{variable.name})"
        meaning = f"{variable.doc} ({variable.kind.label})"
        lines.append(f"| {name} | {cell(variable.documented_default())} | {cell(meaning)} |")
    return lines


def render(names: list[str], page_path: str) -> str:
    environment = registry()
    if names == ["all"]:
        lines: list[str] = []
        for group in environment.GROUPS:
            members = [v for v in environment.VARIABLES if v.group == group]
            lines += [f"## {group}", "", *table(members, None), ""]
        return "\n".join(lines)
    try:
        variables = [environment.by_name(name) for name in names]
    except KeyError as exc:
        raise PluginError(f"{page_path}: no environment variable {exc} in the registry") from None
    depth = page_path.count("/")
    return "\n".join(table(variables, "../" * depth + REFERENCE))


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    path = page.file.src_uri
    return MARKER.sub(lambda m: render(m.group(1).split(), path), markdown)
