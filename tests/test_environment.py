"""The environment is read in one place: issuance.environment, whose entries the settings and
the run-time readers use and the documentation's configuration reference is rendered from.

Read from the source (every module of console/ and issuance/): nothing reads `os.environ` or
`os.getenv` around the registry, and every registered variable is read somewhere, so the
reference lists exactly what the code reads, with the defaults the code uses."""

from __future__ import annotations

import ast
import importlib.util
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from issuance import environment

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "issuance" / "environment.py"
# Writes, not reads: a default for Django's own lookup, and tldextract kept offline.
ALLOWED_WRITES = {"DJANGO_SETTINGS_MODULE", "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"}


def sources() -> list[Path]:
    return sorted(
        path
        for package in ("console", "issuance")
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and path != REGISTRY
    )


def environment_reads(tree: ast.AST) -> list[str]:
    """Where a module touches the environment other than through the registry."""
    allowed = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setdefault"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "environ"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ALLOWED_WRITES
        ):
            allowed.add(id(node.func.value))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in {"environ", "getenv", "environb"}
            and id(node) not in allowed
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            names = {alias.name for alias in node.names}
            if names & {"environ", "getenv", "environb"}:
                found.append(f"line {node.lineno}: from os import {sorted(names)}")
    return found


def registry_reads(tree: ast.AST) -> set[str]:
    """Registry entries a module reads: `<anything>.NAME.value()` or `.raw()`."""
    names = {v.name for v in environment.VARIABLES}
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"value", "raw"}
        ):
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr in names:
                found.add(owner.attr)
            elif isinstance(owner, ast.Name) and owner.id in names:
                found.add(owner.id)
    return found


def parsed() -> dict[Path, ast.AST]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sources()}


def test_the_readers_see_what_they_look_for() -> None:
    # The checks below mean something only if the readers recognise both kinds of access.
    direct = ast.parse('import os\nx = os.environ.get("A")\ny = os.getenv("B")')
    assert len(environment_reads(direct)) == 2
    written = ast.parse('import os\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "x")')
    assert environment_reads(written) == []
    other_write = ast.parse('import os\nos.environ.setdefault("SECRET_KEY", "x")')
    assert len(environment_reads(other_write)) == 1
    through = ast.parse("from issuance import environment as env\nv = env.WORKER_THREADS.value()")
    assert registry_reads(through) == {"WORKER_THREADS"}


def test_nothing_reads_the_environment_around_the_registry() -> None:
    offenders = {
        str(path.relative_to(ROOT)): reads
        for path, tree in parsed().items()
        if (reads := environment_reads(tree))
    }
    assert not offenders, f"read the environment through issuance.environment: {offenders}"


def test_every_registered_variable_is_read() -> None:
    read: set[str] = set()
    for tree in parsed().values():
        read |= registry_reads(tree)
    unread = sorted(v.name for v in environment.VARIABLES if v.name not in read)
    assert not unread, f"registered but never read (remove them, or read them): {unread}"


def test_the_settings_read_through_the_registry() -> None:
    tree = ast.parse((ROOT / "console" / "settings.py").read_text())
    assert registry_reads(tree) >= {
        "DATABASE_URL",
        "SECRET_KEY",
        "KEY_ENCRYPTION_KEY",
        "WORKER_LEASE",
        "REDIS_MAX_CONNECTIONS",
    }


def test_every_variable_is_documented() -> None:
    for variable in environment.VARIABLES:
        assert variable.doc.strip(), variable.name
        assert variable.group in environment.GROUPS, variable.name
        # The shown default is either the literal default or says what it is instead.
        assert variable.documented_default() or variable.default == "", variable.name


def test_values_are_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    # Run-time readers (the Kubernetes connector) see a change made after import.
    monkeypatch.delenv("KUBE_CONNECTOR", raising=False)
    assert environment.KUBE_CONNECTOR.value() is False
    monkeypatch.setenv("KUBE_CONNECTOR", " Yes ")
    assert environment.KUBE_CONNECTOR.value() is True


def test_defaults_and_empty_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORKER_LEASE", "ALLOWED_HOSTS", "MAX_BODY_BYTES", "SELF_CHECK_NAMESERVERS"):
        monkeypatch.delenv(name, raising=False)
    assert environment.WORKER_LEASE.value() == timedelta(seconds=20)
    assert environment.ALLOWED_HOSTS.value() == ["127.0.0.1", "localhost"]
    assert environment.MAX_BODY_BYTES.value() == 256 * 1024
    # Durations: plain seconds or Go form; empty means the default for these.
    monkeypatch.setenv("WORKER_LEASE", "1m30s")
    assert environment.WORKER_LEASE.value() == timedelta(seconds=90)
    monkeypatch.setenv("WORKER_LEASE", "2.5")
    assert environment.WORKER_LEASE.value() == timedelta(seconds=2.5)
    monkeypatch.setenv("WORKER_LEASE", "")
    assert environment.WORKER_LEASE.value() == timedelta(seconds=20)
    monkeypatch.setenv("MAX_BODY_BYTES", "")
    assert environment.MAX_BODY_BYTES.value() == 256 * 1024
    # Lists: an empty value is an empty list, not the default (as the settings always did).
    monkeypatch.setenv("ALLOWED_HOSTS", "")
    assert environment.ALLOWED_HOSTS.value() == []
    monkeypatch.setenv("SELF_CHECK_NAMESERVERS", "10.0.0.53:53, ,10.0.0.54:53")
    assert environment.SELF_CHECK_NAMESERVERS.value() == ["10.0.0.53:53", "10.0.0.54:53"]


def _configuration_hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "configuration.py"
    spec = importlib.util.spec_from_file_location("docs_configuration_hook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_lists_every_variable() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert "<!-- environment: all -->" in page
    rendered = _configuration_hook().render(["all"], "configuration.md")
    for variable in environment.VARIABLES:
        assert f'<span id="{variable.name}"></span>`{variable.name}`' in rendered
        assert variable.documented_default() in rendered
    assert rendered.count("\n## ") + rendered.startswith("## ") == len(environment.GROUPS)
