"""ACME revocation against Pebble: POST /revoke/, the worker sends revokeCert, Pebble's
management API (/cert-status-by-serial/<hex serial>) says Revoked with the reason; then the
certificate is renewed with a new key. keyCompromise is signed with the certificate's own
key (Pebble checks that the JWS key matches the certificate); a repeat after a crash gets
alreadyRevoked from Pebble and counts as done."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.acme.protocol.client import AcmeClient
from issuance.controllers import faults
from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    Event,
    Issuer,
    Order,
    Revocation,
    RevocationState,
    Secret,
)
from issuance.pki.x509 import load_leaf
from tests.e2e.conftest import AcmeStack
from tests.factories import make_certificate, role_group

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}


def pebble_status(stack: AcmeStack, serial: str) -> dict[str, Any]:
    return dict(json.loads(stack.pebble.get(f"/cert-status-by-serial/{serial}")))


def operator() -> APIClient:
    user = User.objects.create_user("olga")
    user.groups.add(role_group("operator"))
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def issue(stack: AcmeStack, drive: Any, name: str) -> tuple[Certificate, str]:
    issuer = Issuer.objects.get(name="pebble")
    make_certificate(name, issuer, dnsNames=[f"{name}.example.test"], privateKey=ECDSA)
    drive(lambda: Certificate.objects.get(name=name).condition_is("Ready"), timeout=90)
    cert = Certificate.objects.get(name=name)
    return cert, Secret.objects.get(name=cert.secret_name).tls_crt


def revoked(serial: str) -> Callable[[], bool]:
    return lambda: Revocation.objects.get(serial=serial).state != RevocationState.PENDING


def test_revoke_with_account_key_then_renew(
    acme_stack: Callable[..., AcmeStack], drive: Any
) -> None:
    stack = acme_stack()
    stack.make_issuer()
    cert, chain = issue(stack, drive, "web")
    leaf = load_leaf(chain)
    serial = format(leaf.serial_number, "x")
    assert pebble_status(stack, serial)["Status"] == "Valid"

    answer = operator().post(
        "/api/v1/certificates/web/revoke/", {"reason": "superseded"}, format="json"
    )
    assert answer.status_code == 202, answer.content
    assert answer.json()["state"] == "Pending"  # the worker sends it, not the web request
    assert pebble_status(stack, serial)["Status"] == "Valid"

    # The worker dies after Pebble revoked it, before the answer was stored.
    faults.CRASH_AT = "revocation-after-ca-call"
    try:
        with pytest.raises(faults.SimulatedCrash):
            drive(lambda: False, timeout=60)
    finally:
        faults.CRASH_AT = None
    assert pebble_status(stack, serial)["Status"] == "Revoked"
    revocation = Revocation.objects.get(serial=serial)
    assert revocation.state == RevocationState.PENDING
    # "Restart": the dead worker's leases run out; the repeat gets alreadyRevoked from Pebble
    # and counts as done, once.
    for model in (Certificate, CertificateRequest, Order, Challenge, Issuer, Revocation):
        model.objects.filter(lease_owner__gt="").update(lease_until=timezone.now())
    drive(revoked(serial), timeout=60)
    revocation.refresh_from_db()
    assert revocation.state == RevocationState.REVOKED, revocation.message
    assert "account key" in revocation.message
    assert "already revoked" in revocation.message
    status = pebble_status(stack, serial)
    assert status["Status"] == "Revoked"
    assert status["Reason"] == 4  # superseded
    assert Event.objects.filter(certificate_name="web", reason="Revoked").count() == 1

    # Renewed with a new key, once.
    drive(lambda: Certificate.objects.get(name="web").revision == 2, timeout=90)
    new_leaf = load_leaf(Secret.objects.get(name=cert.secret_name).tls_crt)
    assert new_leaf.public_key() != leaf.public_key()
    assert pebble_status(stack, format(new_leaf.serial_number, "x"))["Status"] == "Valid"
    assert Event.objects.filter(certificate_name="web", reason="ManuallyTriggered").count() == 1


def test_key_compromise_is_signed_with_the_certificate_key(
    acme_stack: Callable[..., AcmeStack], drive: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = acme_stack()
    stack.make_issuer()
    _, chain = issue(stack, drive, "leaky")
    serial = format(load_leaf(chain).serial_number, "x")
    signers: list[bool] = []
    original = AcmeClient.post

    def spy(self: AcmeClient, url: str, payload: Any, **kwargs: Any) -> Any:
        if kwargs.get("action") == "revoke_cert":
            signers.append(kwargs.get("signer") is not None)
        return original(self, url, payload, **kwargs)

    monkeypatch.setattr(AcmeClient, "post", spy)

    answer = operator().post(
        "/api/v1/certificates/leaky/revoke/", {"reason": "keyCompromise"}, format="json"
    )
    assert answer.status_code == 202, answer.content
    drive(revoked(serial), timeout=60)
    revocation = Revocation.objects.get(serial=serial)
    assert revocation.state == RevocationState.REVOKED, revocation.message
    assert "certificate's own key" in revocation.message
    assert revocation.key_ciphertext == ""  # not kept once done
    assert signers == [True]
    status = pebble_status(stack, serial)
    assert status["Status"] == "Revoked"
    assert status["Reason"] == 1  # keyCompromise
