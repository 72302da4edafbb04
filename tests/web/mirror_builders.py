"""Builders for the cluster-mode page tests: clusters, mirrored rows, events, scoped users.

The rows are made directly in the database, shaped as the mirror stores them (body as the
API server sent it, derived columns beside it): the pages need no kube-apiserver.
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from issuance.kubernetes.certmanager.retry import next_retry
from issuance.models import Cluster, ClusterEvent, ClusterResource, MirroredKind
from tests import factories
from tests.factories import csr_pem

TOKEN = "kubeconfig-secret-token-4f1b2c"


def kubeconfig_text(*contexts: str, current: str = "", token: str = TOKEN) -> str:
    names = contexts or ("prod-admin",)
    lines = [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: c",
        "  cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}",
        "users:",
        "- name: u",
        f"  user: {{token: {token}}}",
        "contexts:",
    ]
    for name in names:
        lines += [f"- name: {name}", "  context: {cluster: c, user: u}"]
    if current or not contexts:
        lines.append(f"current-context: {current or names[0]}")
    return "\n".join(lines) + "\n"


def make_cluster(name: str, **fields: Any) -> Cluster:
    return factories.make_cluster(name, kubeconfig_text(), **fields)


def mirrored(
    cluster: Cluster,
    kind: str,
    namespace: str,
    name: str,
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **columns: Any,
) -> ClusterResource:
    body = {
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": spec or {},
        "status": status or {},
    }
    return ClusterResource.objects.create(
        cluster=cluster,
        kind=kind,
        namespace=namespace,
        name=name,
        uid=body["metadata"]["uid"],
        resource_version="1",
        body=body,
        **columns,
    )


def ready_cert(cluster: Cluster, namespace: str, name: str, days_left: int = 60) -> ClusterResource:
    now = timezone.now()
    not_after = now + timedelta(days=days_left)
    return mirrored(
        cluster,
        MirroredKind.CERTIFICATE,
        namespace,
        name,
        spec={"secretName": f"{name}-tls", "dnsNames": [f"{name}.example.com"]},
        status={
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "up to date"}
            ],
            "notAfter": not_after.isoformat(),
        },
        ready="True",
        reason="Ready",
        issuer_name="letsencrypt",
        issuer_kind="ClusterIssuer",
        certificate_name=name,
        not_after=not_after,
        renewal_time=not_after - timedelta(days=30),
    )


def failing_cert(
    cluster: Cluster,
    namespace: str,
    name: str,
    attempts: int = 3,
    message: str = "Failed to wait for order resource to become ready",
    failed_at: datetime | None = None,
) -> ClusterResource:
    failed_at = failed_at or timezone.now() - timedelta(minutes=10)
    return mirrored(
        cluster,
        MirroredKind.CERTIFICATE,
        namespace,
        name,
        spec={"secretName": f"{name}-tls", "dnsNames": [f"{name}.example.com"]},
        status={
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": message},
                {"type": "Issuing", "status": "False", "reason": "Failed", "message": message},
            ],
            "lastFailureTime": failed_at.isoformat(),
            "failedIssuanceAttempts": attempts,
        },
        ready="False",
        reason="DoesNotExist",
        message=message,
        issuer_name="letsencrypt",
        issuer_kind="ClusterIssuer",
        certificate_name=name,
        failed_attempts=attempts,
        last_failure_time=failed_at,
        next_retry_at=next_retry(failed_at, attempts),
    )


def pending_cr(cluster: Cluster, namespace: str, name: str, certificate: str) -> ClusterResource:
    pem = csr_pem(f"{certificate}.example.com", common_name=f"{certificate}.example.com")
    return mirrored(
        cluster,
        MirroredKind.CERTIFICATE_REQUEST,
        namespace,
        name,
        spec={
            "request": base64.b64encode(pem.encode()).decode(),
            "issuerRef": {"name": "ca", "kind": "Issuer"},
            "duration": "2160h0m0s",
            "username": "system:serviceaccount:cert-manager:cert-manager",
        },
        issuer_name="ca",
        issuer_kind="Issuer",
        owner_kind="Certificate",
        owner_name=certificate,
        certificate_name=certificate,
    )


def child(
    cluster: Cluster, kind: str, namespace: str, name: str, certificate: str, state: str = ""
) -> ClusterResource:
    return mirrored(cluster, kind, namespace, name, state=state, certificate_name=certificate)


def event(
    cluster: Cluster,
    resource: ClusterResource,
    reason: str,
    message: str = "",
    ago: timedelta = timedelta(minutes=1),
) -> ClusterEvent:
    return ClusterEvent.objects.create(
        cluster=cluster,
        uid=str(uuid.uuid4()),
        namespace=resource.namespace,
        involved_kind=resource.kind,
        involved_name=resource.name,
        involved_uid=resource.uid,
        reason=reason,
        message=message,
        source="cert-manager-certificates-trigger",
        last_seen=timezone.now() - ago,
    )
