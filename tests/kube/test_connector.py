"""The Kubernetes connector against a real kube-apiserver v1.20.2 (tests/kube/cluster.py)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from cryptography import x509
from django.contrib.auth.models import User
from kubernetes import client as k8s

from issuance.kubernetes.csr_connector import csr_writeback
from issuance.kubernetes.csr_connector.connector import Connector
from issuance.kubernetes.csr_connector.csr_api import KubeApi
from issuance.kubernetes.csr_connector.csr_mirror import decision_of
from issuance.models import Approval, CertificateRequest, Event, KubeCSR, RequestState, Secret
from issuance.operations import actions
from issuance.pki.x509 import split_pem_chain
from tests.factories import make_ca_issuer
from tests.helpers import drain
from tests.kube.cluster import Cluster
from tests.kube.conftest import NODE_USER, csr_body, node_csr_pem, sync_until

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


def mirrored(name: str) -> KubeCSR | None:
    return KubeCSR.objects.select_related("request").filter(csr_name=name).first()


def submit_as_node(node_api: Any, signer: str, name: str | None = None) -> str:
    name = name or f"node-1-{uuid.uuid4().hex[:6]}"
    pem = node_csr_pem(NODE_USER, "node-1.example.test", ip_addresses=["10.0.0.5"])
    node_api.create_certificate_signing_request(csr_body(name, signer, pem))
    return name


def conditions(kapi: KubeApi, name: str) -> dict[str, dict[str, Any]]:
    obj = kapi.read_csr(name)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_csr_from_the_cluster_shows_up_in_the_approval_queue(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret", maxDuration="24h")
    name = submit_as_node(node_api, signer_name)
    row = sync_until(lambda: mirrored(name), kconn, what="CSR mirrored")
    cr = row.request
    assert cr.source == "kubernetes"
    assert cr.requester == NODE_USER
    assert cr.certificate_id is None
    assert cr.approval == Approval.PENDING
    assert cr.spec["signerName"] == signer_name
    assert cr.spec["usages"] == ["digital signature", "key encipherment", "server auth"]
    assert "system:nodes" in cr.spec["groups"] and "system:authenticated" in cr.spec["groups"]
    assert cr.spec["kubernetes"] == {"name": name, "uid": row.uid}
    # v1.20 has no spec.expirationSeconds: the issuer's default applies.
    assert "expirationSeconds" not in cr.spec and "duration" not in cr.spec
    assert row.resource_version == kapi.read_csr(name)["metadata"]["resourceVersion"]
    # Idempotent: passes and a full re-list do not mirror it twice.
    kconn.watcher.request_relist()
    sync_until(lambda: kconn.watcher.lists >= 2, kconn, what="re-list")
    assert KubeCSR.objects.filter(uid=row.uid).count() == 1
    assert CertificateRequest.objects.filter(source="kubernetes").count() == 1
    # Not mirrored: a signer nobody mapped (kube-controller-manager's business).
    other = f"other-{uuid.uuid4().hex[:6]}"
    created = node_api.create_certificate_signing_request(
        csr_body(other, "example.org/unmapped", node_csr_pem(NODE_USER))
    )
    seen = int(created.metadata.resource_version)
    sync_until(lambda: int(kconn.watcher.resource_version or 0) >= seen, kconn, what="watched")
    kconn.sync()
    assert mirrored(other) is None
    # The person's view: the approval queue shows it with the policy's reason.
    drain()
    cr.refresh_from_db()
    assert cr.approval == Approval.PENDING
    assert cr.policy_checks["outcome"] == "pending"


def test_approve_in_console_is_written_back_and_signed(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    issuer = make_ca_issuer("kube-ca", "kube-ca-secret", maxDuration="48h")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    drain()
    actions.approve(cr, "alice", "LooksRight", "node-1 is ours")
    sync_until(lambda: "Approved" in conditions(kapi, name), kconn, what="Approved on the CSR")
    cond = conditions(kapi, name)["Approved"]
    assert cond["status"] == "True"
    assert cond["reason"] == "LooksRight"
    assert "alice" in cond["message"]
    assert "Denied" not in conditions(kapi, name)
    # The worker signs with the mapped CA issuer; the connector puts the chain in status.
    drain()
    cr.refresh_from_db()
    assert cr.state == RequestState.ISSUED
    status = sync_until(
        lambda: (kapi.read_csr(name).get("status") or {}).get("certificate"), kconn, what="cert"
    )
    pem = base64.b64decode(status).decode()
    leaf = x509.load_pem_x509_certificate(split_pem_chain(pem)[0].encode())
    ca = x509.load_pem_x509_certificate(Secret.objects.get(name="kube-ca-secret").tls_crt.encode())
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["node-1.example.test"]
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert lifetime.total_seconds() == pytest.approx(48 * 3600 + 300, abs=5)  # capped, backdated
    assert issuer.name == cr.issuer.name
    # Timeline: who decided, and both write-backs.
    reasons = list(
        Event.objects.filter(name=cr.name).order_by("created_at").values_list("reason", "actor")
    )
    assert ("Approved", "alice") in reasons
    assert ("DecisionWrittenBack", "alice") in [(r, a) for r, a in reasons]
    assert "CertificateWrittenBack" in [r for r, _ in reasons]


def test_deny_in_console_is_written_back(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    actions.deny(cr, "bob", "UnknownNode", "no such node")
    sync_until(lambda: "Denied" in conditions(kapi, name), kconn, what="Denied on the CSR")
    cond = conditions(kapi, name)["Denied"]
    assert (cond["status"], cond["reason"]) == ("True", "UnknownNode")
    assert "bob" in cond["message"]
    drain()
    cr.refresh_from_db()
    assert cr.state == RequestState.DENIED
    kconn.sync()
    assert not (kapi.read_csr(name).get("status") or {}).get("certificate")
    assert Event.objects.filter(name=cr.name, reason="Denied", actor="bob").exists()


def test_decision_made_in_the_cluster_is_carried_over(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    obj = kapi.read_csr(name)
    obj.setdefault("status", {})["conditions"] = [
        {"type": "Approved", "status": "True", "reason": "KubectlApprove", "message": "ok"}
    ]
    kapi.replace_csr_approval(name, obj)  # what `kubectl certificate approve` does
    sync_until(
        lambda: CertificateRequest.objects.get(pk=cr.pk).approval == Approval.APPROVED, kconn
    )
    cr.refresh_from_db()
    assert cr.decided_by == "kubernetes"
    approved = cr.get_condition("Approved")
    assert approved is not None and approved["reason"] == "KubectlApprove"
    drain()
    sync_until(lambda: (kapi.read_csr(name).get("status") or {}).get("certificate"), kconn)


def test_policy_rules_approve_a_node_csr_automatically(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    issuer = make_ca_issuer("kube-ca", "kube-ca-secret")
    issuer.spec["approvalPolicy"] = {
        "rules": {
            "allowedSignerNames": [signer_name],
            "requesterPattern": "system:node:[a-z0-9-]+",
            "commonNameMustMatchRequester": True,
            "dnsSanRegex": r"[a-z0-9-]+\.example\.test",
            "ipSanCidrs": ["10.0.0.0/8"],
        }
    }
    issuer.save()
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    drain()
    cr.refresh_from_db()
    assert cr.approval == Approval.APPROVED and cr.decided_by == "policy"
    assert [c["passed"] for c in cr.policy_checks["checks"]] == [True] * 5
    sync_until(lambda: (kapi.read_csr(name).get("status") or {}).get("certificate"), kconn)
    assert conditions(kapi, name)["Approved"]["reason"] == "AutoApproved"


def test_stale_write_gets_409_and_is_retried(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    meddled: list[str] = []

    def meddle(csr_name: str, obj: dict[str, Any]) -> None:
        # Someone labels the CSR between our read and our write: our write is stale.
        if not meddled:
            fresh = kapi.read_csr(csr_name)
            fresh["metadata"].setdefault("labels", {})["meddled"] = "yes"
            kapi.certs.replace_certificate_signing_request(csr_name, fresh, _preload_content=False)
            meddled.append(fresh["metadata"]["resourceVersion"])

    csr_writeback.BEFORE_WRITE = meddle
    actions.approve(cr, "carol")
    sync_until(lambda: "Approved" in conditions(kapi, name), kconn, what="Approved after 409")
    assert meddled, "the write was not intercepted"
    assert kconn.conflicts >= 1
    obj = kapi.read_csr(name)
    assert obj["metadata"]["labels"]["meddled"] == "yes"  # their change kept
    assert decision_of(obj)[0] == "Approved"  # ours applied on top
    assert Event.objects.filter(
        name=cr.name, reason="DecisionWrittenBack", message__contains="1 conflict"
    ).exists()


def test_connector_survives_apiserver_restart_and_broken_watch(
    kconn: Connector, node_api: Any, signer_name: str, kube_env: Cluster
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    first = submit_as_node(node_api, signer_name)
    sync_until(lambda: mirrored(first), kconn)
    watches = kconn.watcher.watches
    kube_env.restart_apiserver()  # SIGKILL: the open watch breaks mid-stream
    second = submit_as_node(node_api, signer_name)
    sync_until(lambda: mirrored(second), kconn, timeout=60, what="CSR after restart mirrored")
    assert kconn.watcher.watches > watches  # it reconnected
    # A resourceVersion the server no longer has: 410 Gone -> list again, nothing lost.
    lists = kconn.watcher.lists
    kconn.watcher.stop(timeout=15)  # the open watch ends within watch_seconds
    assert not kconn.watcher.alive
    kconn.watcher.resource_version = "1"
    kconn.watcher.start()
    third = submit_as_node(node_api, signer_name)
    sync_until(lambda: mirrored(third), kconn, timeout=60, what="CSR after 410 mirrored")
    assert kconn.watcher.lists > lists
    assert KubeCSR.objects.count() == 3


def test_deleted_csr_leaves_the_queue(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    kapi.certs.delete_certificate_signing_request(name)
    sync_until(lambda: CertificateRequest.objects.get(pk=cr.pk).approval == Approval.DENIED, kconn)
    cr.refresh_from_db()
    denied = cr.get_condition("Denied")
    assert denied is not None and denied["reason"] == "CSRDeleted"
    assert KubeCSR.objects.get(request=cr).deleted


def test_secret_export_writes_tls_secret_per_revision(kconn: Connector, kapi: KubeApi) -> None:
    from tests.factories import make_certificate

    issuer = make_ca_issuer("kube-ca", "kube-ca-secret")
    secret_name = f"web-tls-{uuid.uuid4().hex[:6]}"
    cert = make_certificate(
        "web", issuer, secretExport={"namespace": "default", "name": secret_name}
    )
    drain()
    cert.refresh_from_db()
    assert cert.revision == 1
    first = sync_until(lambda: _secret(kapi, secret_name), kconn, what="Secret exported")
    stored = Secret.objects.get(name=cert.secret_name)
    assert first["type"] == "kubernetes.io/tls"
    assert _b64(first["data"]["tls.crt"]) == stored.tls_crt
    assert _b64(first["data"]["tls.key"]) == stored.tls_key
    assert _b64(first["data"]["ca.crt"]) == stored.ca_crt
    assert first["metadata"]["annotations"]["cert-manager.io/certificate-name"] == "web"
    # A new revision replaces the Secret's contents.
    actions.force_renew(cert, "dave")
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2

    def replaced() -> dict[str, Any] | None:
        secret = _secret(kapi, secret_name)
        assert secret is not None, "the exported Secret is gone"
        current = Secret.objects.get(name=cert.secret_name).tls_crt
        return secret if _b64(secret["data"]["tls.crt"]) == current else None

    second = sync_until(replaced, kconn, what="Secret replaced")
    assert second["data"]["tls.crt"] != first["data"]["tls.crt"]
    assert second["metadata"]["annotations"]["issuance.console/revision"] == "2"
    assert Event.objects.filter(certificate_name="web", reason="SecretExported").count() == 2


def _secret(kapi: KubeApi, name: str) -> dict[str, Any] | None:
    try:
        return kapi.read_secret("default", name)
    except k8s.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _b64(value: str) -> str:
    return base64.b64decode(value).decode()


def test_certctl_approve_reaches_the_cluster(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi
) -> None:
    from io import StringIO

    from django.core.management import call_command

    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    call_command(
        "certctl", "approve", cr.name, "--reason", "CliOK", "--as", "frank", stdout=StringIO()
    )
    sync_until(lambda: "Approved" in conditions(kapi, name), kconn, what="Approved via certctl")
    cond = conditions(kapi, name)["Approved"]
    assert cond["reason"] == "CliOK" and "frank" in cond["message"]


def test_secret_export_failure_is_reported_and_backed_off(kconn: Connector, kapi: KubeApi) -> None:
    from django.utils import timezone

    from issuance.models import SecretExport
    from tests.factories import make_certificate

    issuer = make_ca_issuer("kube-ca", "kube-ca-secret")
    namespace = f"missing-{uuid.uuid4().hex[:6]}"
    cert = make_certificate("api", issuer, secretExport={"namespace": namespace, "name": "api-tls"})
    drain()
    sync_until(
        lambda: SecretExport.objects.filter(certificate=cert, attempts__gte=1).exists(), kconn
    )
    record = SecretExport.objects.get(certificate=cert)
    assert record.exported_revision is None
    assert record.last_error.startswith("404")
    assert record.next_attempt_at is not None and record.next_attempt_at > timezone.now()
    failed = Event.objects.filter(certificate_name="api", reason="SecretExportFailed")
    assert failed.count() == 1 and namespace in failed.get().message
    # Once the namespace exists, the next attempt (after the backoff) succeeds.
    kapi.core.create_namespace({"metadata": {"name": namespace}})
    SecretExport.objects.filter(pk=record.pk).update(next_attempt_at=timezone.now())
    sync_until(lambda: _secret_in(kapi, namespace, "api-tls"), kconn, what="exported after fix")
    record.refresh_from_db()
    assert record.exported_revision == 1 and record.last_error == ""


def _secret_in(kapi: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return kapi.read_secret(namespace, name)
    except k8s.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_web_console_approve_reaches_the_cluster(
    kconn: Connector, node_api: Any, signer_name: str, kapi: KubeApi, role_users: dict[str, User]
) -> None:
    from django.test import Client

    make_ca_issuer("kube-ca", "kube-ca-secret")
    name = submit_as_node(node_api, signer_name)
    cr = sync_until(lambda: mirrored(name), kconn).request
    drain()
    browser = Client()
    browser.force_login(role_users["approver"])
    assert cr.name in browser.get("/requests/").content.decode()
    response = browser.post(
        f"/requests/{cr.name}/approve/", {"reason": "WebOK", "message": "checked the node"}
    )
    assert response.status_code == 302
    sync_until(lambda: "Approved" in conditions(kapi, name), kconn, what="Approved via the web")
    cond = conditions(kapi, name)["Approved"]
    assert cond["reason"] == "WebOK" and "approver" in cond["message"]
    drain()
    sync_until(lambda: (kapi.read_csr(name).get("status") or {}).get("certificate"), kconn)
