"""Shared fixtures: users per role, API clients, and the CI rule that real-server tests never skip."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.roles import ROLES
from tests.factories import role_group

REAL_SERVER_MARKERS = ("postgres", "redis", "e2e", "browser", "kube")
_skipped_real: list[str] = []


# Test modules that share one expensive session fixture (kube-apiservers) run in one
# pytest-xdist worker, so each worker does not start its own.
SHARED_SERVER_MODULES = (
    ("tests/clusters/", "kube-cert-manager"),
    ("tests/browser/test_live_cluster.py", "kube-cert-manager"),
    ("tests/kube/", "kube-csr"),
)


def worker_group(nodeid: str) -> str:
    """The unit of work handed to one pytest-xdist worker: a test module (so module fixtures
    such as a PowerDNS or Pebble start once), or the modules that share session servers."""
    module = nodeid.split("::", 1)[0]
    for prefix, group in SHARED_SERVER_MODULES:
        if module.startswith(prefix):
            return group
    return module


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent when it is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Not `--dist loadgroup` with xdist_group marks: pytest-xdist 3.8 writes the group into
    # Item._nodeid, which pytest 9 no longer reads, so the marks are silently ignored.
    from xdist.scheduler import LoadScopeScheduling

    scheduler = LoadScopeScheduling(config, log)
    scheduler._split_scope = worker_group  # the scope of a node id: its module, by default
    return scheduler


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        if item.get_closest_marker("postgres") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and any(m in report.keywords for m in REAL_SERVER_MARKERS):
        _skipped_real.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI", "").lower() == "true" and _skipped_real:
        print("\nCI=true: these real-server tests were skipped, which fails the run:")
        for nodeid in _skipped_real:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(username: str, *roles: str, superuser: bool = False) -> User:
        user = User.objects.create_user(username=username, password="pw-" + username)
        if superuser:
            user.is_superuser = True
            user.is_staff = True
            user.save()
        for role in roles:
            assert role in ROLES, role
            user.groups.add(role_group(role))
        return user

    return make


@pytest.fixture
def role_users(make_user: Callable[..., User]) -> dict[str, User]:
    """One user per role, plus `nobody` (authenticated, no role)."""
    users = {role: make_user(role, role) for role in ROLES}
    users["nobody"] = make_user("nobody")
    return users


@pytest.fixture
def api_client_for() -> Callable[[User | None], APIClient]:
    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user=user)
        return client

    return make
