"""API contract: shapes, camelCase status, who/when of actions, immutability, filters, secrets."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import (
    Approval,
    Certificate,
    CertificateRequest,
    Event,
    Issuer,
    Secret,
)
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.specs.secret_refs import read_secret_value
from tests.api.conftest import counts
from tests.factories import csr_pem, make_order

CERT_STATUS_KEYS = {
    "state",
    "conditions",
    "observedGeneration",
    "notBefore",
    "notAfter",
    "renewalTime",
    "revision",
    "lastFailureTime",
    "failedIssuanceAttempts",
    "nextRetryTime",
    "renewRequestedAt",
    "renewRequestedBy",
    "lastError",
    "caUnreachable",
    "renewalInfo",
    "issuedBy",
    "deployment",
    "endpoints",
}


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["operator"])


@pytest.fixture
def admin(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["admin"])


@pytest.fixture
def approver(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["approver"])


def test_certificate_create_shape_and_normalization(
    world: dict[str, Any], operator: APIClient
) -> None:
    response = operator.post(
        "/api/v1/certificates/",
        {
            "name": "shop",
            "spec": {
                "dnsNames": ["Shop.Example.TEST", "*.shop.example.test"],
                "ipAddresses": ["2001:db8:0::1"],
                "issuerRef": {"name": "ss", "kind": "Issuer", "group": "cert-manager.io"},
                "renewBeforePercentage": 25,
                "privateKey": {"algorithm": "ECDSA", "size": 384, "rotationPolicy": "Never"},
            },
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "name",
        "metadata",
        "generation",
        "createdAt",
        "updatedAt",
        "spec",
        "status",
    }
    assert body["metadata"] == {"name": "shop", "labels": {}}
    assert set(body["status"]) == CERT_STATUS_KEYS
    assert body["spec"]["dnsNames"] == ["shop.example.test", "*.shop.example.test"]
    assert body["spec"]["ipAddresses"] == ["2001:db8::1"]
    assert body["spec"]["duration"] == "2160h0m0s"
    assert body["spec"]["secretName"] == "shop"
    assert body["status"]["state"] == "Pending"
    cert = Certificate.objects.get(name="shop")
    assert cert.issuer.name == "ss"
    assert cert.due_at is not None
    assert "shop.example.test" in cert.search_text
    event = Event.objects.get(kind="Certificate", name="shop", reason="Created")
    assert event.actor == "operator"
    assert operator.get("/api/v1/certificates/shop/").json() == {
        **body,
        "updatedAt": operator.get("/api/v1/certificates/shop/").json()["updatedAt"],
    }


def test_certificate_update_bumps_generation_and_records_who(
    world: dict[str, Any], operator: APIClient
) -> None:
    url = "/api/v1/certificates/web/"
    spec = {"dnsNames": ["new.example.test"], "issuerRef": {"name": "ca"}, "secretName": "new-tls"}
    response = operator.put(url, {"spec": spec}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["generation"] == 2
    cert = Certificate.objects.get(name="web")
    assert (cert.issuer.name, cert.secret_name) == ("ca", "new-tls")
    assert cert.search_text == "web new.example.test"
    event = Event.objects.get(name="web", reason="SpecChanged")
    assert event.actor == "operator"
    assert "spec.dnsNames" in event.message and "spec.issuerRef" in event.message
    # The same spec again changes nothing.
    assert operator.put(url, {"spec": spec}, format="json").json()["generation"] == 2
    assert Event.objects.filter(name="web", reason="SpecChanged").count() == 1


def test_patch_is_a_json_merge_patch(world: dict[str, Any], operator: APIClient) -> None:
    url = "/api/v1/certificates/web/"
    body = operator.patch(url, {"spec": {"renewBefore": "240h"}}, format="json").json()
    assert body["spec"]["renewBefore"] == "240h0m0s"
    assert body["spec"]["dnsNames"] == ["web.example.test"]
    body = operator.patch(
        url, {"spec": {"renewBefore": None, "renewBeforePercentage": 50}}, format="json"
    ).json()
    assert "renewBefore" not in body["spec"]
    assert body["spec"]["renewBeforePercentage"] == 50
    assert body["generation"] == 3


def test_manifest_shaped_body_and_cluster_issuer(world: dict[str, Any], admin: APIClient) -> None:
    manifest = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "ClusterIssuer",
        "metadata": {"name": "root"},
        "spec": {"selfSigned": {}},
    }
    response = admin.post("/api/v1/issuers/", manifest, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "ClusterIssuer"
    assert Issuer.objects.get(name="root").cluster_scoped is True
    again = admin.post("/api/v1/issuers/", manifest, format="json")
    assert again.status_code == 409
    assert "already exists" in again.json()["detail"]
    bad = admin.post(
        "/api/v1/issuers/", {**manifest, "kind": "Certificate", "extra": 1}, format="json"
    )
    assert bad.status_code == 400
    assert set(bad.json()) == {"kind", "extra"}


def test_renew_records_who_and_when(world: dict[str, Any], operator: APIClient) -> None:
    cert = world["web"]
    Certificate.objects.filter(pk=cert.pk).update(
        next_retry_time=timezone.now() + timedelta(hours=1), due_at=None
    )
    before = timezone.now()
    response = operator.post("/api/v1/certificates/web/renew/")
    assert response.status_code == 202
    status = response.json()["status"]
    assert status["renewRequestedBy"] == "operator"
    cert.refresh_from_db()
    assert cert.renew_requested_at is not None and cert.renew_requested_at >= before
    assert cert.due_at is not None and cert.due_at <= timezone.now()
    event = Event.objects.get(name="web", reason="ManuallyTriggered")
    assert event.actor == "operator"
    assert "backoff" in event.message
    assert event.created_at >= before


def test_approve_and_deny_are_final(world: dict[str, Any], approver: APIClient) -> None:
    url = "/api/v1/certificaterequests/ext-1/"
    response = approver.post(
        url + "approve/", {"reason": "Checked", "message": "ok"}, format="json"
    )
    assert response.status_code == 200
    status = response.json()["status"]
    assert status["approval"] == "Approved"
    assert status["decidedBy"] == "approver"
    (condition,) = [c for c in status["conditions"] if c["type"] == "Approved"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "Checked",
        "ok",
    )
    again = approver.post(url + "deny/", {"reason": "Changed", "message": "mind"}, format="json")
    assert again.status_code == 409
    assert "final" in again.json()["detail"]
    assert CertificateRequest.objects.get(name="ext-1").approval == Approval.APPROVED
    event = Event.objects.get(kind="CertificateRequest", name="ext-1", reason="Approved")
    assert event.actor == "approver"


def test_deny_sets_denied_condition(world: dict[str, Any], approver: APIClient) -> None:
    response = approver.post(
        "/api/v1/certificaterequests/ext-1/deny/", {"message": "unknown host"}, format="json"
    )
    assert response.status_code == 200
    status = response.json()["status"]
    assert status["approval"] == "Denied"
    assert any(
        c["type"] == "Denied" and c["status"] == "True" and c["reason"] == "Denied"
        for c in status["conditions"]
    )
    assert approver.post("/api/v1/certificaterequests/ext-1/approve/").status_code == 409


def test_certificate_request_spec_is_immutable(world: dict[str, Any], operator: APIClient) -> None:
    url = "/api/v1/certificaterequests/ext-1/"
    original = CertificateRequest.objects.get(name="ext-1").spec
    response = operator.patch(url, {"spec": {"duration": "1h", "isCA": True}}, format="json")
    assert response.status_code == 409
    assert "immutable" in response.json()["detail"]
    assert response.json()["fields"] == ["spec.duration", "spec.isCA"]
    put = operator.put(url, {"spec": original}, format="json")
    assert put.status_code == 409  # never a silent no-op
    assert CertificateRequest.objects.get(name="ext-1").spec == original


def test_create_certificate_request_from_csr(world: dict[str, Any], operator: APIClient) -> None:
    pem = csr_pem("api.example.test")
    response = operator.post(
        "/api/v1/certificaterequests/",
        {
            "spec": {
                "request": base64.b64encode(pem.encode()).decode(),  # cert-manager's form
                "issuerRef": {"name": "ca"},
                "expirationSeconds": 3600,
                "usages": ["digital signature", "server auth"],
            }
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["requester"] == "operator" and body["source"] == "api"
    assert body["owner"] is None
    assert body["spec"]["request"] == pem
    assert body["spec"]["duration"] == "1h0m0s"
    cr = CertificateRequest.objects.get(name=body["name"])
    assert cr.approval == Approval.PENDING and cr.due_at is not None
    duplicate = operator.post(
        "/api/v1/certificaterequests/",
        {"name": "ext-1", "spec": {"request": pem, "issuerRef": {"name": "ca"}}},
        format="json",
    )
    assert duplicate.status_code == 409
    # The requester comes from the authenticated user, never from the body.
    forged = operator.post(
        "/api/v1/certificaterequests/",
        {"spec": {"request": pem, "issuerRef": {"name": "ca"}, "username": "root"}},
        format="json",
    )
    assert forged.status_code == 400
    assert "spec.username" in forged.json()


def test_secret_endpoint(world: dict[str, Any], admin: APIClient, operator: APIClient) -> None:
    response = admin.get("/api/v1/certificates/web/secret/")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"name", "tls.crt", "tls.key", "ca.crt"}
    assert "PRIVATE KEY" in body["tls.key"]
    assert Event.objects.filter(name="web", reason="SecretRead", actor="admin").exists()
    cert = operator.post(
        "/api/v1/certificates/",
        {"name": "fresh", "spec": {"dnsNames": ["fresh.test"], "issuerRef": {"name": "ss"}}},
        format="json",
    )
    assert cert.status_code == 201
    missing = admin.get("/api/v1/certificates/fresh/secret/")
    assert missing.status_code == 404
    assert "not issued" in missing.json()["detail"]


def test_delete_issuer_in_use_is_a_conflict(
    world: dict[str, Any], operator: APIClient, admin: APIClient
) -> None:
    response = admin.delete("/api/v1/issuers/ss/")
    assert response.status_code == 409
    assert "Certificate/web" in response.json()["detail"]
    assert Issuer.objects.filter(name="ss").exists()
    assert operator.delete("/api/v1/certificates/web/").status_code == 204
    assert admin.delete("/api/v1/issuers/ss/").status_code == 204
    assert Event.objects.filter(name="ss", reason="Deleted", actor="admin").exists()


def _inline_ca() -> tuple[str, str]:
    key = generate_private_key({"algorithm": "RSA", "size": 2048})
    cert = sign_csr(
        build_csr(key, {"commonName": "Inline CA"}),
        key,
        None,
        duration=timedelta(days=30),
        now=timezone.now(),
        is_ca=True,
    )
    return cert, private_key_to_pem(key)


def test_private_keys_never_in_list_or_detail(world: dict[str, Any], admin: APIClient) -> None:
    cert_pem, key_pem = _inline_ca()
    response = admin.post(
        "/api/v1/issuers/",
        {"name": "inline", "spec": {"ca": {"certificate": cert_pem, "privateKey": key_pem}}},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["spec"] == {"ca": {"secretName": "inline-ca"}}
    stored = Secret.objects.get(name="inline-ca")
    assert "PRIVATE KEY" not in stored.tls_key_ciphertext  # encrypted at rest
    assert "PRIVATE KEY" in stored.tls_key
    hmac = base64.urlsafe_b64encode(b"k" * 32).decode().rstrip("=")
    acme = admin.post(
        "/api/v1/issuers/",
        {
            "name": "acme",
            "spec": {
                "acme": {
                    "server": "https://acme.test/dir",
                    "externalAccountBinding": {"keyID": "kid-1", "hmacKey": hmac},
                    "solvers": [{"http01": {}}],
                }
            },
        },
        format="json",
    )
    assert acme.status_code == 201, acme.content
    eab = acme.json()["spec"]["acme"]["externalAccountBinding"]
    assert eab == {"keyID": "kid-1", "keySecretRef": {"name": "acme-eab", "key": "secret"}}
    assert read_secret_value("acme-eab", "secret") == hmac
    order = make_order(world["ext"], "order-1", challenges=2)
    urls = [
        "/api/v1/issuers/",
        "/api/v1/issuers/inline/",
        "/api/v1/issuers/acme/",
        "/api/v1/certificates/",
        "/api/v1/certificates/web/",
        "/api/v1/certificaterequests/",
        "/api/v1/certificaterequests/ext-1/",
        "/api/v1/orders/",
        f"/api/v1/orders/{order.name}/",
        "/api/v1/challenges/",
        f"/api/v1/challenges/{order.name}-0/",
        "/api/v1/events/",
    ]
    for url in urls:
        text = json.dumps(admin.get(url).json())
        assert "PRIVATE KEY" not in text, url
        assert hmac not in text, url
    # Only the dedicated endpoint shows a key.
    assert "PRIVATE KEY" in admin.get("/api/v1/certificates/web/secret/").json()["tls.key"]


def test_filters_and_pagination(world: dict[str, Any], operator: APIClient) -> None:
    for i in range(5):
        operator.post(
            "/api/v1/certificates/",
            {
                "name": f"svc-{i}",
                "spec": {"dnsNames": [f"svc{i}.internal.test"], "issuerRef": {"name": "ca"}},
            },
            format="json",
        )
    Certificate.objects.filter(name="svc-3").update(state="Ready")

    def names(query: str) -> list[str]:
        return [c["name"] for c in operator.get(f"/api/v1/certificates/{query}").json()["results"]]

    assert names("?search=INTERNAL") == [f"svc-{i}" for i in range(5)]
    assert names("?search=svc2.internal") == ["svc-2"]
    assert names("?state=Ready") == ["svc-3"]
    assert names("?issuer=ss") == ["web"]
    page = operator.get("/api/v1/certificates/?limit=2&offset=2").json()
    assert page["count"] == 6
    assert [c["name"] for c in page["results"]] == ["svc-2", "svc-3"]
    assert "offset=4" in page["next"]
    events = operator.get("/api/v1/events/?kind=Certificate&name=svc-4").json()["results"]
    assert [e["reason"] for e in events] == ["Created"]
    assert events[0]["actor"] == "operator"


def test_orders_challenges_and_scheduler(world: dict[str, Any], operator: APIClient) -> None:
    order = make_order(world["ext"], "order-1", challenges=3, processing=1)
    detail = operator.get(f"/api/v1/orders/{order.name}/").json()
    assert detail["request"] == "ext-1"
    assert detail["certificate"] is None
    assert set(detail["status"]) == {
        "url",
        "finalizeURL",
        "certificateURL",
        "state",
        "reason",
        "authorizations",
        "certificate",
        "failureTime",
        "lastError",
        "restarts",
    }
    challenges = operator.get(f"/api/v1/challenges/?order={order.name}").json()["results"]
    assert [c["name"] for c in challenges] == ["order-1-0", "order-1-1", "order-1-2"]
    assert challenges[0]["status"]["processing"] is True
    assert {"presented", "nextCheckAt", "attempts", "state", "reason"} <= set(
        challenges[0]["status"]
    )
    assert len(operator.get("/api/v1/challenges/?processing=true").json()["results"]) == 1
    state = operator.get("/api/v1/scheduler/").json()
    assert (state["processing"], state["queued"], state["free"]) == (1, 2, state["cap"] - 1)
    assert state["oldestQueuedAt"] is not None


def test_invalid_body_changes_nothing(world: dict[str, Any], operator: APIClient) -> None:
    before = counts()
    response = operator.post("/api/v1/certificates/", {"name": "x"}, format="json")
    assert response.status_code == 400
    assert "spec" in response.json()
    assert counts() == before


def test_browsable_api_renders_without_keys(
    world: dict[str, Any], role_users: dict[str, User], client: Client
) -> None:
    client.force_login(role_users["admin"])
    for url in [
        "/api/v1/",
        "/api/v1/certificates/",
        "/api/v1/certificates/web/",
        "/api/v1/issuers/ca/",
        "/api/v1/certificaterequests/ext-1/",
        "/api/v1/scheduler/",
    ]:
        response = client.get(url, HTTP_ACCEPT="text/html")
        assert response.status_code == 200, url
        assert response["Content-Type"].startswith("text/html")
        assert b"PRIVATE KEY" not in response.content, url
