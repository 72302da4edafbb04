"""Shared fixtures: users per role, API clients, and the CI rule that real-server tests never skip."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.roles import ROLES
from tests.factories import role_group

REAL_SERVER_MARKERS = ("postgres", "redis", "e2e", "browser", "kube")
_skipped_real: list[str] = []


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
