"""Revocation with a CA issuer: the action (API, page, certctl), the served CRL checked with
`openssl crl` and `openssl verify -crl_check`, the CRL Distribution Point in issued
certificates, the renewal with a new key, and who may revoke."""

from __future__ import annotations

import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from issuance.models import Certificate, Event, Issuer, Revocation, Secret
from issuance.pki.x509 import load_leaf, split_pem_chain
from issuance.specs.errors import SpecError
from issuance.specs.issuer import validate_issuer_spec
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer
from tests.helpers import drain

pytestmark = pytest.mark.django_db

CRL_URL = "http://console.example.test/crl/ca.crl"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def issued(name: str, issuer: Issuer) -> Certificate:
    make_certificate(name, issuer, privateKey={"algorithm": "ECDSA", "size": 256})
    drain()
    cert = Certificate.objects.get(name=name)
    assert cert.condition_is("Ready"), cert.conditions
    return cert


def leaf_pem(cert: Certificate) -> str:
    return split_pem_chain(Secret.objects.get(name=cert.secret_name).tls_crt)[0]


@pytest.fixture
def ca() -> Issuer:
    return make_ca_issuer("ca", crlDistributionPoint=CRL_URL)


def api(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def revoke_api(client: Client, name: str, body: Any) -> Any:
    return client.post(
        f"/api/v1/certificates/{name}/revoke/", body, content_type="application/json"
    )


def openssl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=30
    )


def test_crl_lists_the_revoked_certificate_for_openssl(
    ca: Issuer, role_users: dict[str, User], tmp_path: Path
) -> None:
    web, other = issued("web", ca), issued("other", ca)
    revoked_leaf, other_leaf = leaf_pem(web), leaf_pem(other)
    # The issuer's CRL URL is in what it signs.
    points = load_leaf(revoked_leaf).extensions.get_extension_for_class(x509.CRLDistributionPoints)
    assert [p.full_name[0].value for p in points.value if p.full_name] == [CRL_URL]

    answer = revoke_api(api(role_users["operator"]), "web", {"reason": "keyCompromise"})
    assert answer.status_code == 202, answer.content
    body = answer.json()
    serial = format(load_leaf(revoked_leaf).serial_number, "x")
    assert body["state"] == "Revoked"
    assert body["serial"] == serial
    assert body["reason"] == "keyCompromise"
    assert body["requestedBy"] == "operator"
    assert body["revokedAt"]

    # Public: no login.
    response = Client().get("/crl/ca.crl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pkix-crl"
    (tmp_path / "ca.crl").write_bytes(response.content)
    ca_pem = Secret.objects.get(name="test-ca").tls_crt
    (tmp_path / "ca.pem").write_text(ca_pem)
    (tmp_path / "revoked.pem").write_text(revoked_leaf)
    (tmp_path / "other.pem").write_text(other_leaf)

    text = openssl("crl", "-inform", "DER", "-in", "ca.crl", "-noout", "-text", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "Next Update" in text.stdout
    assert serial.upper().zfill(len(serial) + len(serial) % 2) in text.stdout.replace(":", "")
    assert "Key Compromise" in text.stdout
    # The signature is the CA's.
    check = openssl(
        "crl", "-inform", "DER", "-in", "ca.crl", "-CAfile", "ca.pem", "-noout", cwd=tmp_path
    )
    assert check.returncode == 0, check.stderr
    assert "verify OK" in check.stderr + check.stdout

    pem_crl = openssl("crl", "-inform", "DER", "-in", "ca.crl", "-out", "ca.crl.pem", cwd=tmp_path)
    assert pem_crl.returncode == 0, pem_crl.stderr
    verify = ("verify", "-crl_check", "-CAfile", "ca.pem", "-CRLfile", "ca.crl.pem")
    bad = openssl(*verify, "revoked.pem", cwd=tmp_path)
    assert bad.returncode != 0
    assert "certificate revoked" in bad.stdout + bad.stderr
    good = openssl(*verify, "other.pem", cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr

    # Then renewed with a new key; the new certificate is not on the CRL.
    drain()
    web.refresh_from_db()
    assert web.condition_is("Ready"), web.conditions
    assert web.revision == 2
    new_leaf = leaf_pem(web)
    assert load_leaf(new_leaf).public_key() != load_leaf(revoked_leaf).public_key()
    (tmp_path / "new.pem").write_text(new_leaf)
    assert openssl(*verify, "new.pem", cwd=tmp_path).returncode == 0
    reasons = list(
        Event.objects.filter(certificate_name="web").order_by("id").values_list("reason", "actor")
    )
    assert ("Revoked", "operator") in reasons
    assert ("ManuallyTriggered", "operator") in reasons


def test_key_is_rotated_even_with_rotation_policy_never(ca: Issuer) -> None:
    make_certificate(
        "pinned",
        ca,
        privateKey={"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Never"},
    )
    drain()
    cert = Certificate.objects.get(name="pinned")
    before = load_leaf(leaf_pem(cert)).public_key()
    from issuance.operations import actions

    actions.revoke(cert, "superseded", actor="alice")
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2
    assert load_leaf(leaf_pem(cert)).public_key() != before


def test_unknown_reason_is_400_naming_reason(ca: Issuer, role_users: dict[str, User]) -> None:
    issued("web", ca)
    client = api(role_users["operator"])
    for body in ({"reason": "bored"}, {}, {"reason": "keyCompromise", "extra": 1}):
        answer = revoke_api(client, "web", body)
        assert answer.status_code == 400, answer.content
        assert set(answer.json()) & {"reason", "extra"}, answer.json()
    assert "reason" in revoke_api(client, "web", {"reason": "bored"}).json()
    assert not Revocation.objects.exists()


@pytest.mark.parametrize(
    ("role", "status"),
    [("viewer", 403), ("approver", 403), ("nobody", 403), ("operator", 202), ("admin", 202)],
)
def test_roles(ca: Issuer, role_users: dict[str, User], role: str, status: int) -> None:
    issued("web", ca)
    answer = revoke_api(api(role_users[role]), "web", {"reason": "superseded"})
    assert answer.status_code == status, answer.content
    assert Revocation.objects.count() == (1 if status == 202 else 0)


def test_conflicts(ca: Issuer, role_users: dict[str, User]) -> None:
    client = api(role_users["operator"])
    make_certificate("fresh", ca)  # not issued yet
    answer = revoke_api(client, "fresh", {"reason": "superseded"})
    assert answer.status_code == 409
    assert "no issued certificate" in answer.json()["detail"]
    issued("web", ca)
    assert revoke_api(client, "web", {"reason": "superseded"}).status_code == 202
    again = revoke_api(client, "web", {"reason": "superseded"})
    assert again.status_code == 409
    assert "already revoked" in again.json()["detail"]
    issued("self", make_selfsigned_issuer("ss"))
    selfsigned = revoke_api(client, "self", {"reason": "superseded"})
    assert selfsigned.status_code == 409
    assert "self-signed" in selfsigned.json()["detail"]
    assert Revocation.objects.count() == 1


def test_page_button_confirmation_and_csrf(ca: Issuer, role_users: dict[str, User]) -> None:
    issued("web", ca)
    viewer = api(role_users["viewer"])
    assert 'id="revoke"' not in viewer.get("/certificates/web/").content.decode()
    assert viewer.get("/certificates/web/revoke/").status_code == 403
    assert viewer.post("/certificates/web/revoke/", {"reason": "superseded"}).status_code == 403

    operator = Client(enforce_csrf_checks=True)
    operator.force_login(role_users["operator"])
    page = operator.get("/certificates/web/").content.decode()
    assert 'id="revoke"' in page
    # The button leads to a confirmation step; nothing is revoked by looking at it.
    confirm = operator.get("/certificates/web/revoke/")
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert "csrfmiddlewaretoken" in html
    assert "data-confirm=" in html
    assert "/crl/ca.crl" in html
    assert not Revocation.objects.exists()
    # Without the CSRF token: refused.
    assert operator.post("/certificates/web/revoke/", {"reason": "superseded"}).status_code == 403
    assert not Revocation.objects.exists()
    token = confirm.cookies["csrftoken"].value
    done = operator.post(
        "/certificates/web/revoke/",
        {"reason": "cessationOfOperation", "csrfmiddlewaretoken": token},
    )
    assert done.status_code == 302
    revocation = Revocation.objects.get()
    assert (revocation.reason, revocation.requested_by) == ("cessationOfOperation", "operator")
    assert revocation.state == "Revoked"
    shown = operator.get("/certificates/web/").content.decode()
    assert "Revocations" in shown
    assert revocation.serial in shown


def test_certctl_revoke(ca: Issuer) -> None:
    issued("web", ca)
    out = StringIO()
    call_command("certctl", "revoke", "web", "--reason", "keyCompromise", "--as", "bob", stdout=out)
    assert "revoked" in out.getvalue()
    revocation = Revocation.objects.get()
    assert (revocation.reason, revocation.requested_by) == ("keyCompromise", "bob")
    with pytest.raises(CommandError, match="already revoked"):
        call_command("certctl", "revoke", "web", "--reason", "keyCompromise", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("certctl", "revoke", "web", "--reason", "bored", stdout=StringIO())


def test_crl_of_unknown_or_non_ca_issuer_is_404(ca: Issuer) -> None:
    make_selfsigned_issuer("ss")
    assert Client().get("/crl/ss.crl").status_code == 404
    assert Client().get("/crl/nope.crl").status_code == 404
    assert Client().get("/crl/ca.crl").status_code == 200


@pytest.mark.parametrize("url", ["ftp://x.example/ca.crl", "not a url", "https://"])
def test_crl_distribution_point_must_be_http_url(url: str) -> None:
    spec = {"ca": {"secretName": "s", "crlDistributionPoint": url}}
    with pytest.raises(SpecError) as caught:
        validate_issuer_spec("ca", spec, lookups=False)
    assert "spec.ca.crlDistributionPoint" in dict(caught.value.errors)


def test_crl_distribution_point_accepted() -> None:
    spec = {"ca": {"secretName": "s", "crlDistributionPoint": CRL_URL}}
    plan = validate_issuer_spec("ca", spec, lookups=False)
    assert plan.spec["ca"]["crlDistributionPoint"] == CRL_URL
