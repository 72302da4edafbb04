"""mkdocs hook: the permission table rendered from issuance.access.permissions at build time.

`<!-- permissions: table -->` (docs/roles.md) becomes one row per rule: the resource, the
action, the roles that may do it, where the role must be held and which surfaces offer it.
The table is the one the console's pages, the REST API, its OpenAPI schema and the
permission-matrix tests read, so this page cannot say anything else than the code does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- permissions: table -->"


def table_module() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from issuance.access import permissions

    return permissions


def render() -> str:
    permissions = table_module()
    lines = [
        "| Resource | Action | Who | Where | API | Console | Note |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in permissions.RULES:
        who = " or ".join(rule.roles) if rule.roles else "any signed-in user"
        where = "" if not rule.roles else rule.reach
        note = rule.note.replace("|", "\\|")  # a pipe would end the cell
        lines.append(
            f"| {rule.resource} | {rule.action} | {who} | {where} | "
            f"{'yes' if rule.api else ''} | {'yes' if rule.console else ''} | "
            f"{note} |"
        )
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
