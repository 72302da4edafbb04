"""A module name means one thing (docs/decisions/0007-package-layout.md).

Two modules under issuance/ or console/ (packages count, by their folder's name) may share a
base name only when they are the same concern seen from the layers that are split by
resource: at most one of them outside LAYERS (the concern itself, e.g. issuance.access.users)
and at most one in each layer (issuance.api.users, console.web.users). Two modules outside
those layers never share a name: `signing` for webhook HMACs and for X.509 was two things.

Exempt, because the name says a module's role inside its package and is always read with
the package's name:
- `__init__`, `apps`, `urls`, `views`: Django finds or names them so;
- `base`, `registry`: a package's contract and its table of implementations
  (issuance.controllers.base, issuance.issuers.registry).

And no module is named like a library the project imports (`notifications.channels` beside
Django Channels), unless it is about that library's subject: `acme` is ACME and
`kubernetes` is Kubernetes.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("issuance", "console")
LAYERS = (
    "issuance.models",
    "issuance.specs",
    "issuance.api",
    "issuance.controllers",
    "issuance.cli",
    "issuance.management.commands",
    "console",
)
EXEMPT = {"__init__", "apps", "urls", "views", "base", "registry"}
SAME_SUBJECT_AS_THE_LIBRARY = {"acme", "kubernetes"}


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append(".".join(parts))
    return sorted(found)


def _layer_of(module: str) -> str | None:
    matches = [layer for layer in LAYERS if module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def _by_base_name(modules: list[str] | None = None) -> dict[str, list[str]]:
    named: dict[str, list[str]] = defaultdict(list)
    for module in _modules() if modules is None else modules:
        if module in PACKAGES:  # the two roots are the project's own names
            continue
        base = module.rpartition(".")[2]
        if base not in EXEMPT:
            named[base].append(module)
    return named


def name_clashes(among: list[str] | None = None) -> list[str]:
    clashes = []
    for base, modules in sorted(_by_base_name(among).items()):
        if len(modules) < 2:
            continue
        outside = [m for m in modules if _layer_of(m) is None]
        per_layer: dict[str | None, list[str]] = defaultdict(list)
        for module in modules:
            per_layer[_layer_of(module)].append(module)
        if len(outside) > 1 or any(len(ms) > 1 for layer, ms in per_layer.items() if layer):
            clashes.append(f"{base}: {', '.join(modules)}")
    return clashes


def test_no_two_modules_share_a_name_for_different_things() -> None:
    assert name_clashes() == []


def test_the_rule_sees_a_clash() -> None:
    # The old layout's pair: two modules outside the layers.
    assert name_clashes(["issuance.signing", "issuance.pki.signing"]) == [
        "signing: issuance.signing, issuance.pki.signing"
    ]
    # Two in one layer.
    assert name_clashes(["issuance.api.users", "issuance.api.admin.users"]) != []
    # One concern seen from each layer, and an exempt name.
    assert name_clashes(["issuance.access.users", "issuance.api.users", "console.web.users"]) == []
    assert name_clashes(["issuance.bootstrap.urls", "issuance.api.urls", "console.urls"]) == []


def _imported_top_level_names() -> set[str]:
    names: set[str] = set()
    for folder in (*PACKAGES, "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.partition(".")[0])
    return names - {*PACKAGES, "tests", "bench"}


def test_no_module_is_named_like_a_library_the_project_imports() -> None:
    libraries = _imported_top_level_names()
    assert {"channels", "kubernetes", "requests", "secrets"} <= libraries  # it sees them
    assert "django" in libraries and "json" in sys.stdlib_module_names
    shadowing = {
        module
        for base, modules in _by_base_name().items()
        if base in libraries and base not in SAME_SUBJECT_AS_THE_LIBRARY
        for module in modules
    }
    assert shadowing == set()
