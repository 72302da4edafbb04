from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from issuance.models import Approval, CertificateRequest, Event, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("certctl", *args, stdout=out)
    return out.getvalue()


def external_request(name: str = "ext-1") -> CertificateRequest:
    issuer = make_selfsigned_issuer()
    key = generate_private_key({"algorithm": "ECDSA"})
    csr = build_csr(key, {"commonName": "node-1", "dnsNames": ["node-1.example.test"]})
    return CertificateRequest.objects.create(
        name=name,
        issuer=issuer,
        spec={"request": csr, "issuerRef": {"name": issuer.name}},
        requester="alice",
        source="api",
    )


def test_renew_records_actor_and_event() -> None:
    cert = make_certificate("web", make_selfsigned_issuer())
    out = run("renew", "web", "--as", "bob")
    assert "Manually triggered issuance of Certificate web" in out
    cert.refresh_from_db()
    assert cert.renew_requested_by == "bob"
    assert cert.renew_requested_at is not None
    event = Event.objects.get(kind="Certificate", name="web", reason="ManuallyTriggered")
    assert event.actor == "bob"


def test_renew_unknown_certificate_is_an_error_and_renews_nothing() -> None:
    make_certificate("web", make_selfsigned_issuer())
    with pytest.raises(CommandError, match="not found: nope"):
        run("renew", "web", "nope")
    assert not Event.objects.filter(reason="ManuallyTriggered").exists()


def test_approve_then_deny_is_refused() -> None:
    cr = external_request()
    assert "approved" in run("approve", cr.name, "--reason", "LooksFine", "--as", "carol")
    cr.refresh_from_db()
    assert cr.approval == Approval.APPROVED
    assert cr.decided_by == "carol"
    cond = cr.get_condition("Approved")
    assert cond is not None
    assert cond["reason"] == "LooksFine"
    with pytest.raises(CommandError, match="already Approved"):
        run("deny", cr.name)
    cr.refresh_from_db()
    assert cr.get_condition("Denied") is None


def test_deny_records_reason_and_message() -> None:
    cr = external_request()
    run("deny", cr.name, "--reason", "UnknownHost", "--message", "not ours", "--as", "dave")
    cr.refresh_from_db()
    assert cr.approval == Approval.DENIED
    ev = Event.objects.get(kind="CertificateRequest", name=cr.name, reason="Denied")
    assert ev.actor == "dave"
    assert "not ours" in ev.message


def test_status_shows_conditions_backoff_and_events() -> None:
    cert = make_certificate("api", make_selfsigned_issuer())
    now = timezone.now()
    cert.set_condition("Ready", "False", "Failed", "boom")
    cert.failed_issuance_attempts = 2
    cert.last_failure_time = now
    cert.next_retry_time = now + timedelta(hours=2)
    cert.labels = {"team": "payments", "env": "prod"}
    cert.save()
    Event.objects.create(kind="Certificate", name="api", certificate_name="api", reason="Failed")
    out = run("status", "api")
    assert "Labels:      env=prod, team=payments" in out
    assert "Ready=False reason=Failed" in out
    assert "Failed issuance attempts: 2" in out
    assert "Next retry:" in out
    assert "Certificate/api Failed" in out


def test_status_of_unknown_name() -> None:
    with pytest.raises(CommandError, match="no Certificate or CertificateRequest named 'x'"):
        run("status", "x")


def test_inspect_decodes_certificate_and_never_prints_the_key() -> None:
    cert = make_certificate("site", make_selfsigned_issuer(), dnsNames=["site.example.test"])
    key = generate_private_key({"algorithm": "RSA", "size": 2048})
    csr = build_csr(key, cert.spec)
    pem = sign_csr(csr, key, None, duration=timedelta(days=30), now=timezone.now())
    secret = Secret(name=cert.secret_name, tls_crt=pem, ca_crt=pem, certificate=cert)
    secret.tls_key = private_key_to_pem(key)
    secret.save()
    out = run("inspect", "site")
    assert "site.example.test" in out
    assert "RSA 2048" in out
    assert "stored (encrypted at rest)" in out
    assert "PRIVATE KEY" not in out


def test_inspect_request_shows_csr() -> None:
    cr = external_request("ext-2")
    out = run("inspect", cr.name)
    assert "node-1.example.test" in out
    assert "ECDSA 256" in out
