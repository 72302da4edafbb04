"""API test fixtures: a small world of issuers, a certificate with a stored key pair, a request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings
from rest_framework.test import APIClient

from issuance.models import CertificateRequest, Issuer, Secret
from tests.factories import csr_pem, make_ca_issuer, make_certificate, make_selfsigned_issuer


@pytest.fixture
def world(db: None) -> dict[str, Any]:
    ss = make_selfsigned_issuer("ss")
    ca = make_ca_issuer("ca", secret_name="ca-key-pair")
    spare = make_selfsigned_issuer("spare")
    web = make_certificate("web", ss)
    tls = Secret.objects.get(name="ca-key-pair")
    # A stored key pair for "web" (any pair will do for the API).
    stored = Secret(name=web.secret_name, tls_crt=tls.tls_crt, ca_crt=tls.ca_crt, certificate=web)
    stored.tls_key = tls.tls_key
    stored.save()
    ext = CertificateRequest.objects.create(
        name="ext-1",
        issuer=ca,
        spec={"request": csr_pem(), "issuerRef": {"name": "ca", "kind": "Issuer"}},
        requester="someone",
        source="api",
    )
    return {"ss": ss, "ca": ca, "spare": spare, "web": web, "ext": ext}


def counts() -> dict[str, int]:
    from issuance.models import Certificate, Event

    return {
        "issuers": Issuer.objects.count(),
        "certificates": Certificate.objects.count(),
        "requests": CertificateRequest.objects.count(),
        "secrets": Secret.objects.count(),
        "events": Event.objects.count(),
    }


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    """role_users makes five users per test; PBKDF2 would dominate the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    """Issuers (and their approval policies) are changed by admins only
    (issuance.access.permissions)."""
    return api_client_for(role_users["admin"])
