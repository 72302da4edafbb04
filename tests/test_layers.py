"""The import rules between layers (docs/architecture.md, "Layers"), read from the source
(every import statement, also inside functions): models never reach the worker, nothing but
the commands that run it imports the worker's internals, the ACME protocol package never
reaches the models, the framework bypasses reach nothing above the models, and the domain
never imports the web project."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("issuance", "console")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _sources() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _resolve(name: str) -> str | None:
    """The project module an import names (`issuance.acme.client.AcmeClient` is a name in
    `issuance.acme.client`), or None for a library."""
    sources = _sources()
    while name:
        if name in sources:
            return name
        name = name.rpartition(".")[0]
    return None


@cache
def imports_of(module: str) -> frozenset[str]:
    """The project modules `module` imports directly (anywhere in its source)."""
    path = _sources()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    resolved = {_resolve(name) for name in names}
    return frozenset(r for r in resolved if r is not None and r != module)


def reached_from(module: str) -> dict[str, list[str]]:
    """Every project module `module` imports directly or through others, with one chain."""
    chains: dict[str, list[str]] = {module: [module]}
    todo = [module]
    while todo:
        current = todo.pop()
        for imported in sorted(imports_of(current)):
            if imported not in chains:
                chains[imported] = [*chains[current], imported]
                todo.append(imported)
    return chains


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _modules(prefix: str) -> list[str]:
    return sorted(m for m in _sources() if _in(m, (prefix,)))


def test_the_import_reader_finds_real_edges() -> None:
    # The rules below mean something only if the reader sees imports at all.
    assert "issuance.acme.exchange" in imports_of("issuance.acme.client")
    assert "issuance.models" in imports_of("issuance.controllers.acme.accounts")
    assert "issuance.models" in reached_from("issuance.controllers.challenges")
    assert WORKER_INTERFACE in imports_of("issuance.controllers.challenges")
    assert "issuance.worker.loop" in imports_of("issuance.management.commands.reconcile")


WORKER = ("issuance.worker",)
# The worker's interface to the rest of the code: wake(obj), notify_workers().
WORKER_INTERFACE = "issuance.worker.wakeup"
# The commands that run a worker.
RUNS_THE_WORKER = ("issuance.management.commands.reconcile", "issuance.management.commands.serve")


@pytest.mark.parametrize("module", _modules("issuance.models"))
def test_models_never_reach_the_worker(module: str) -> None:
    bad = {m: chain for m, chain in reached_from(module).items() if _in(m, WORKER)}
    assert not bad, f"{module} imports the worker: {' -> '.join(next(iter(bad.values())))}"


OUTSIDE_THE_WORKER = [m for m in _sources() if not _in(m, WORKER) and m not in RUNS_THE_WORKER]


# `from issuance.worker import wakeup` names the package too, which imports nothing.
ALLOWED = {WORKER_INTERFACE, "issuance.worker"}


@pytest.mark.parametrize("module", OUTSIDE_THE_WORKER)
def test_only_the_wakeup_interface_of_the_worker_is_imported(module: str) -> None:
    bad = sorted(m for m in imports_of(module) if _in(m, WORKER) and m not in ALLOWED)
    assert not bad, f"{module} imports worker internals {bad}"


@pytest.mark.parametrize("module", _modules("issuance.fastpaths"))
def test_the_bypasses_reach_nothing_above_the_models(module: str) -> None:
    above = ("issuance.worker", "issuance.controllers", "issuance.api", "issuance.specs", "console")
    bad = {m: chain for m, chain in reached_from(module).items() if _in(m, above)}
    assert not bad, f"{module} reaches {' -> '.join(next(iter(bad.values())))}"


@pytest.mark.parametrize("module", _modules("issuance"))
def test_the_domain_never_imports_the_web_project(module: str) -> None:
    bad = sorted(m for m in imports_of(module) if _in(m, ("console",)))
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("module", _modules("issuance.acme"))
def test_the_acme_protocol_package_never_reaches_the_models(module: str) -> None:
    state = ("issuance.models", "issuance.worker", "issuance.worker.wakeup", "issuance.events")
    bad = {m: chain for m, chain in reached_from(module).items() if _in(m, state)}
    assert not bad, f"{module} reaches state: {' -> '.join(next(iter(bad.values())))}"


def test_the_worker_package_itself_imports_nothing() -> None:
    # So that importing the wake-up interface does not load the loop and the controllers.
    assert imports_of("issuance.worker") == frozenset()


def test_the_json_shapes_import_nothing_from_the_project() -> None:
    # Models, the ACME protocol package and the bypasses all use them.
    assert imports_of("issuance.shapes") == frozenset()
