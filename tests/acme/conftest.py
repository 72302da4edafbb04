"""Shared fixtures of the ACME client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from issuance.acme import health, ratelimit
from issuance.acme.accounts import forget_clients
from tests.acme.fakeca import FakeCA


@pytest.fixture
def ca() -> Iterator[FakeCA]:
    """The scripted ACME server, with no client or CA pause left over from another test."""
    server = FakeCA()
    ratelimit.forget_cache()
    health.forget()
    forget_clients()
    yield server
    server.stop()
    forget_clients()
    ratelimit.forget_cache()
    health.forget()
