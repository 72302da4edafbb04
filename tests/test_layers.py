"""The import rules between layers (docs/architecture.md, "Layers").

The rules themselves are import-linter contracts in pyproject.toml ([tool.importlinter]):
the domain never imports the web project, models never reach the worker, nothing but the
commands that run it imports the worker's internals, the ACME protocol package never reaches
stored state, the framework bypasses reach nothing above the models, and the two uses of
Kubernetes share only the shared modules. This test runs `lint-imports`, so `make test`
enforces them too; the two rules below are about a module importing nothing at all, which
the contracts do not state.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Guards against a configuration that checks nothing (a renamed table, no contracts).
    assert "0 broken" in result.stdout
    assert "6 kept" in result.stdout, result.stdout


def _project_graph() -> grimp.ImportGraph:
    return grimp.build_graph("issuance", "console", cache_dir=None)


def test_the_import_graph_sees_real_edges() -> None:
    # The two rules below mean something only if the graph sees imports at all.
    graph = _project_graph()
    assert "issuance.acme.protocol.exchange" in graph.find_modules_directly_imported_by(
        "issuance.acme.protocol.client"
    )
    assert "issuance.worker.wakeup" in graph.find_modules_directly_imported_by(
        "issuance.controllers.challenges"
    )


def test_the_worker_package_itself_imports_nothing() -> None:
    # So that importing the wake-up interface does not load the loop and the controllers.
    assert _project_graph().find_modules_directly_imported_by("issuance.worker") == set()


def test_the_json_shapes_import_nothing_from_the_project() -> None:
    # Models, the ACME protocol package and the bypasses all use them.
    assert _project_graph().find_modules_directly_imported_by("issuance.shapes") == set()
