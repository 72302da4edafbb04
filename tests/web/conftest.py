"""Fixtures for web console tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings

from issuance.models import Issuer
from tests.factories import make_selfsigned_issuer


@pytest.fixture
def client_for(role_users: dict[str, User]) -> Callable[[str | None], Client]:
    """A test client logged in as the user of a role ("viewer", "operator", …) or anonymous."""

    def make(role: str | None) -> Client:
        client = Client()
        if role is not None:
            client.force_login(role_users[role])
        return client

    return make


@pytest.fixture
def issuer(db: None) -> Issuer:
    return make_selfsigned_issuer("selfsigned")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    # Role users are created per test; PBKDF2 would dominate the run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def django_admin_on(settings: Settings) -> Iterator[None]:
    """ENABLE_DJANGO_ADMIN=1 for one test: /admin/ is routed when the URLconf is loaded, so
    it is loaded again with the setting on, and again after the test with it off."""
    import importlib

    from django.urls import clear_url_caches

    import console.urls

    settings.ENABLE_DJANGO_ADMIN = True
    clear_url_caches()
    importlib.reload(console.urls)
    yield
    settings.ENABLE_DJANGO_ADMIN = False
    clear_url_caches()
    importlib.reload(console.urls)
