"""Bootstrap tokens: an external client submits CSRs and reads its own, and nothing else."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from cryptography import x509
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.bootstrap.certificaterequests import MAX_PENDING_PER_TOKEN
from issuance.bootstrap.tokens import create_token, hash_secret, revoke
from issuance.models import (
    Approval,
    BootstrapToken,
    CertificateRequest,
    Event,
    Issuer,
    RequestState,
)
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from issuance.pki.x509 import split_pem_chain
from issuance.worker.loop import Worker
from tests.factories import make_ca_issuer

pytestmark = pytest.mark.django_db
URL = "/api/v1/bootstrap/certificaterequests/"


def csr(cn: str = "system:node:node-1", dns: list[str] | None = None) -> str:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    return build_csr(key, {"commonName": cn, "dnsNames": dns or ["node-1.example.test"]})


def client_with(token: str | None) -> APIClient:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def issuer() -> Issuer:
    return make_ca_issuer("node-ca", "node-ca-secret", maxDuration="2h")


@pytest.fixture
def token(issuer: Issuer) -> str:
    return create_token(actor="admin", description="node-1")[1]


def submit(token: str, **body: Any) -> Any:
    payload = {"request": csr(), "issuerRef": {"name": "node-ca"}, **body}
    return client_with(token).post(URL, payload, format="json")


def test_token_format_and_storage(issuer: Issuer) -> None:
    row, full = create_token(actor="admin", ttl=timedelta(hours=1))
    token_id, secret = full.split(".")
    assert len(token_id) == 6 and len(secret) == 16
    assert token_id == row.token_id
    assert row.secret_hash == hash_secret(secret) and secret not in row.secret_hash
    assert row.username == f"system:bootstrap:{token_id}"
    assert row.all_groups == ["system:bootstrappers"]
    assert timedelta(minutes=59) < row.expires_at - timezone.now() <= timedelta(hours=1)
    assert Event.objects.filter(kind="BootstrapToken", name=token_id, reason="Created").exists()


def test_submit_poll_and_download(token: str) -> None:
    response = submit(token, name="node-1-serving", expirationSeconds=7200, usages=["server auth"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "node-1-serving"
    assert body["status"]["approval"] == "Pending" and body["status"]["certificate"] is None
    cr = CertificateRequest.objects.get(name="node-1-serving")
    token_id = token.split(".", maxsplit=1)[0]
    assert (cr.source, cr.requester) == ("bootstrap", f"system:bootstrap:{token_id}")
    assert cr.spec["username"] == cr.requester
    assert cr.spec["groups"] == ["system:bootstrappers"]
    assert cr.spec["expirationSeconds"] == 7200 and cr.spec["duration"] == "2h0m0s"
    # Stays Pending until a person approves (the issuer has no rules).
    Worker(threads=1).run_once()
    polled = client_with(token).get(URL + "node-1-serving/").json()
    assert polled["status"]["approval"] == "Pending"
    assert "no approval rules" in polled["status"]["conditions"][0]["message"]
    actions.approve(cr, "alice", "Checked", "node-1 verified")
    Worker(threads=1).run_once()
    polled = client_with(token).get(URL + "node-1-serving/").json()
    assert polled["status"]["state"] == "Issued"
    assert polled["status"]["decidedBy"] == "alice"
    leaf = x509.load_pem_x509_certificate(
        split_pem_chain(polled["status"]["certificate"])[0].encode()
    )
    ca = x509.load_pem_x509_certificate(polled["status"]["ca"].encode())
    leaf.verify_directly_issued_by(ca)
    # min(requested 2h, issuer max 2h) and notBefore backdated 5 minutes.
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert lifetime == timedelta(hours=2, minutes=5)
    assert abs(timezone.now() - timedelta(minutes=5) - leaf.not_valid_before_utc) < timedelta(
        seconds=30
    )


def test_signed_duration_is_capped_by_the_issuer(token: str) -> None:
    assert submit(token, name="long", expirationSeconds=30 * 86400).status_code == 201
    cr = CertificateRequest.objects.get(name="long")
    actions.approve(cr, "alice")
    Worker(threads=1).run_once()
    cr.refresh_from_db()
    assert cr.state == RequestState.ISSUED
    leaf = x509.load_pem_x509_certificate(split_pem_chain(cr.certificate_pem)[0].encode())
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == timedelta(hours=2, minutes=5)


def test_too_short_expiration_is_refused(token: str) -> None:
    response = submit(token, expirationSeconds=60)
    assert response.status_code == 400
    assert "expirationSeconds" in response.json()  # the body field, as sent


def test_scope_own_requests_only(issuer: Issuer, token: str) -> None:
    other = create_token(actor="admin")[1]
    assert submit(token, name="mine").status_code == 201
    assert submit(other, name="theirs").status_code == 201
    mine = client_with(token)
    # Reads its own; another token's request is invisible (404, not 403: names don't leak).
    assert mine.get(URL + "mine/").status_code == 200
    assert mine.get(URL + "theirs/").status_code == 404
    assert mine.get(URL + "nonexistent/").status_code == 404
    assert [i["name"] for i in mine.get(URL).json()["items"]] == ["mine"]
    # Cannot list all, read, or approve through the main API: it does not know the token.
    assert mine.get("/api/v1/certificaterequests/").status_code == 401
    assert mine.get("/api/v1/certificaterequests/mine/").status_code == 401
    assert mine.post("/api/v1/certificaterequests/mine/approve/", {}).status_code == 401
    assert mine.post("/api/v1/certificaterequests/theirs/deny/", {}).status_code == 401
    assert mine.get("/api/v1/certificates/").status_code == 401
    # ...and the bootstrap API has no decision verbs.
    assert mine.post(URL + "mine/approve/", {}).status_code == 404
    assert mine.put(URL + "mine/", {}, format="json").status_code == 405
    assert mine.delete(URL + "mine/").status_code == 405
    for name in ("mine", "theirs"):
        assert CertificateRequest.objects.get(name=name).approval == Approval.PENDING


def test_bad_tokens_are_401(issuer: Issuer, token: str) -> None:
    token_id = token.split(".", maxsplit=1)[0]
    assert client_with(None).get(URL).status_code == 401
    assert client_with("not-a-token").get(URL).status_code == 401
    assert client_with(f"{token_id}.{'x' * 16}").get(URL).status_code == 401
    assert client_with("abcdef.0123456789abcdef").get(URL).status_code == 401
    response = client_with(None).get(URL, HTTP_AUTHORIZATION="Bearer")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    BootstrapToken.objects.filter(token_id=token_id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert client_with(token).get(URL).status_code == 401
    fresh = create_token(actor="admin")[1]
    assert client_with(fresh).get(URL).status_code == 200
    revoke(fresh.split(".")[0], "admin")
    assert client_with(fresh).get(URL).status_code == 401


def test_console_users_cannot_use_the_bootstrap_api(
    issuer: Issuer, role_users: dict[str, User]
) -> None:
    client = APIClient()
    client.force_login(role_users["admin"])
    assert client.get(URL).status_code == 401


def test_signer_name_and_issuer_limits(issuer: Issuer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBE_SIGNER_NAMES", "example.com/node-serving=node-ca")
    make_ca_issuer("other-ca", "other-ca-secret")
    limited = create_token(actor="admin", issuer_names=["node-ca"])[1]
    body = {"request": csr(), "signerName": "example.com/node-serving"}
    response = client_with(limited).post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["spec"]["signerName"] == "example.com/node-serving"
    assert response.json()["spec"]["issuerRef"]["name"] == "node-ca"
    unknown = client_with(limited).post(
        URL, {"request": csr(), "signerName": "example.com/nope"}, format="json"
    )
    assert unknown.status_code == 400 and "signerName" in unknown.json()
    other = client_with(limited).post(
        URL, {"request": csr(), "issuerRef": {"name": "other-ca"}}, format="json"
    )
    assert other.status_code == 400 and "issuerRef.name" in other.json()
    claims = client_with(limited).post(
        URL,
        {"request": csr(), "issuerRef": {"name": "node-ca"}, "username": "system:admin"},
        format="json",
    )
    assert claims.status_code == 400 and "username" in claims.json()
    broken = client_with(limited).post(
        URL, {"request": "garbage", "issuerRef": {"name": "node-ca"}}, format="json"
    )
    assert broken.status_code == 400 and "spec.request" in broken.json()
    assert CertificateRequest.objects.count() == 1


def test_pending_requests_per_token_are_limited(token: str) -> None:
    for i in range(MAX_PENDING_PER_TOKEN):
        assert submit(token, name=f"r{i}").status_code == 201
    assert submit(token, name="one-too-many").status_code == 429
    actions.deny(CertificateRequest.objects.get(name="r0"), "alice")
    assert submit(token, name="after-deny").status_code == 201


def test_bootstrap_token_command(issuer: Issuer) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "bootstrap_token",
        "create",
        "--ttl",
        "2h",
        "--description",
        "rack 4",
        "--issuer",
        "node-ca",
        "--as",
        "ops",
        stdout=out,
        stderr=err,
    )
    full = out.getvalue().strip()
    token_id = full.split(".")[0]
    row = BootstrapToken.objects.get(token_id=token_id)
    assert (row.description, row.issuer_names, row.created_by) == ("rack 4", ["node-ca"], "ops")
    assert client_with(full).get(URL).status_code == 200
    listing = StringIO()
    call_command("bootstrap_token", "list", stdout=listing)
    assert token_id in listing.getvalue() and "active" in listing.getvalue()
    assert full.split(".")[1] not in listing.getvalue()
    call_command("bootstrap_token", "revoke", token_id, stdout=StringIO())
    assert client_with(full).get(URL).status_code == 401
    with pytest.raises(CommandError):
        call_command("bootstrap_token", "create", "--issuer", "nope", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("bootstrap_token", "revoke", "zzzzzz", stdout=StringIO())


def test_contract_of_the_bootstrap_api(token: str) -> None:
    """What the schema says: nulls until signed, JSON bodies only, 400 naming a query
    parameter, 404 for a name that cannot exist (without asking the database)."""
    created = submit(token, name="node-1-serving").json()
    assert set(created) == {"name", "createdAt", "spec", "status"}
    status = created["status"]
    assert (status["certificate"], status["ca"], status["decidedAt"]) == (None, None, None)
    assert created["createdAt"].endswith("Z")
    client = client_with(token)
    assert client.get(URL + "?limit=5").json() == {
        "limit": ["unknown query parameter; this endpoint takes none"]
    }
    assert client.get(URL + "node-1-serving/?x=%00").status_code == 400
    for name in ("node%00", "Node-1", "a" * 254):
        response = client.get(URL + name + "/")
        assert response.status_code == 404, name
    form = client.post(URL, "name=x", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415
    assert client.post(URL, "[]", content_type="application/json").status_code == 400
    assert CertificateRequest.objects.count() == 1


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"expirationSeconds": 10**15}, "expirationSeconds"),  # was an OverflowError: a 500
        ({"expirationSeconds": "3600"}, "expirationSeconds"),
        ({"expirationSeconds": True}, "expirationSeconds"),
        ({"signerName": 5}, "signerName"),
        ({"issuerRef": {"name": "node-ca", "kind": "Vault"}}, "issuerRef.kind"),
        ({"issuerRef": {"name": "node-ca", "colour": "red"}}, "issuerRef.colour"),
        ({"usages": ["server auth", "world domination"]}, "usages[1]"),
        ({"name": 5}, "name"),
    ],
)
def test_submission_shape_is_checked_field_by_field(
    token: str, extra: dict[str, Any], field: str
) -> None:
    response = submit(token, **extra)
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert CertificateRequest.objects.count() == 0


def test_nulls_the_schema_allows(token: str) -> None:
    response = submit(token, name=None, signerName=None, expirationSeconds=None)
    assert response.status_code == 201, response.content
    assert response.json()["name"].startswith("csr-")
