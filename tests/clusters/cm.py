"""Objects shaped as cert-manager writes them (field names from its public API reference),
and a small admin client to create them in a test cluster and write their status."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s

from issuance.kubernetes.certmanager.kinds import BY_KIND, CERT_MANAGER_GROUP, VERSION
from tests.factories import csr_pem

Obj = dict[str, Any]


def ts(when: datetime) -> str:
    return when.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def certificate(name: str, namespace: str, *dns_names: str, issuer: str = "letsencrypt") -> Obj:
    return {
        "apiVersion": f"{CERT_MANAGER_GROUP}/{VERSION}",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "secretName": f"{name}-tls",
            "dnsNames": list(dns_names) or [f"{name}.example.com"],
            "issuerRef": {"name": issuer, "kind": "ClusterIssuer", "group": CERT_MANAGER_GROUP},
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        },
    }


def failed_status(attempts: int, failed_at: datetime, message: str = "") -> Obj:
    """What cert-manager writes after a failed issuance (Ready False, Issuing False)."""
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "DoesNotExist",
                "message": "Issuing certificate as Secret does not exist",
                "lastTransitionTime": ts(failed_at),
                "observedGeneration": 1,
            },
            {
                "type": "Issuing",
                "status": "False",
                "reason": "Failed",
                "message": message
                or "The certificate request has failed to complete and will be retried: "
                "Failed to wait for order resource to become ready",
                "lastTransitionTime": ts(failed_at),
                "observedGeneration": 1,
            },
        ],
        "lastFailureTime": ts(failed_at),
        "failedIssuanceAttempts": attempts,
    }


def ready_status(not_before: datetime, days: int = 90, renew_before_days: int = 30) -> Obj:
    not_after = not_before + timedelta(days=days)
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "Certificate is up to date and has not expired",
                "lastTransitionTime": ts(not_before),
                "observedGeneration": 1,
            }
        ],
        "notBefore": ts(not_before),
        "notAfter": ts(not_after),
        "renewalTime": ts(not_after - timedelta(days=renew_before_days)),
        "revision": 1,
    }


def certificate_request(
    name: str, namespace: str, certificate_name: str, *dns_names: str, issuer: str = "ca"
) -> Obj:
    pem = csr_pem(*(dns_names or (f"{certificate_name}.example.com",)))
    return {
        "apiVersion": f"{CERT_MANAGER_GROUP}/{VERSION}",
        "kind": "CertificateRequest",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                "cert-manager.io/certificate-name": certificate_name,
                "cert-manager.io/certificate-revision": "1",
                "cert-manager.io/private-key-secret-name": f"{certificate_name}-x7k2p",
            },
        },
        "spec": {
            "request": base64.b64encode(pem.encode()).decode(),
            "issuerRef": {"name": issuer, "kind": "Issuer", "group": CERT_MANAGER_GROUP},
            "usages": ["digital signature", "key encipherment"],
            "duration": "2160h0m0s",
            "username": "system:serviceaccount:cert-manager:cert-manager",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
    }


def order(name: str, namespace: str, request_name: str, *dns_names: str) -> Obj:
    return {
        "apiVersion": f"acme.{CERT_MANAGER_GROUP}/{VERSION}",
        "kind": "Order",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "request": base64.b64encode(b"-----BEGIN CERTIFICATE REQUEST-----").decode(),
            "issuerRef": {
                "name": "letsencrypt",
                "kind": "ClusterIssuer",
                "group": CERT_MANAGER_GROUP,
            },
            "dnsNames": list(dns_names),
        },
    }


def challenge(name: str, namespace: str, dns_name: str, type_: str = "HTTP-01") -> Obj:
    token = uuid.uuid4().hex
    return {
        "apiVersion": f"acme.{CERT_MANAGER_GROUP}/{VERSION}",
        "kind": "Challenge",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "url": f"https://acme.example/chall/{token[:10]}",
            "authorizationURL": f"https://acme.example/authz/{token[10:20]}",
            "dnsName": dns_name,
            "wildcard": False,
            "type": type_,
            "token": token,
            "key": f"{token}.thumbprint",
            "solver": {"http01": {"ingress": {"class": "nginx"}}},
            "issuerRef": {
                "name": "letsencrypt",
                "kind": "ClusterIssuer",
                "group": CERT_MANAGER_GROUP,
            },
        },
    }


def owned_by(obj: Obj, owner: Obj) -> Obj:
    """Add the ownerReference cert-manager sets (Order -> CertificateRequest -> Certificate)."""
    meta = owner["metadata"]
    obj["metadata"].setdefault("ownerReferences", []).append(
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    )
    return obj


class CertManagerObjects:
    """Create, read, update status and delete cert-manager objects as the cluster admin."""

    def __init__(self, api: k8s.ApiClient) -> None:
        # Any: bodies and answers are plain dicts here, not the client's models.
        self.custom: Any = k8s.CustomObjectsApi(api)
        self.core: Any = k8s.CoreV1Api(api)

    def _where(self, obj_or_kind: Obj | str) -> tuple[str, str, str]:
        kind = BY_KIND[obj_or_kind if isinstance(obj_or_kind, str) else obj_or_kind["kind"]]
        return kind.group, VERSION, kind.plural

    def create(self, obj: Obj, status: Obj | None = None) -> Obj:
        """Create; then, as cert-manager's controllers do, write `status` separately."""
        group, version, plural = self._where(obj)
        namespace = obj["metadata"].get("namespace")
        if namespace:
            made: Obj = self.custom.create_namespaced_custom_object(
                group, version, namespace, plural, obj
            )
        else:
            made = self.custom.create_cluster_custom_object(group, version, plural, obj)
        if status is not None:
            made = self.set_status(made, status)
        return made

    def get(self, kind: str, namespace: str, name: str) -> Obj:
        group, version, plural = self._where(kind)
        got: Obj = self.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
        return got

    def set_status(self, obj: Obj, status: Obj) -> Obj:
        group, version, plural = self._where(obj)
        meta = obj["metadata"]
        body = {**obj, "status": status}
        written: Obj = self.custom.replace_namespaced_custom_object_status(
            group, version, meta["namespace"], plural, meta["name"], body
        )
        return written

    def update(self, obj: Obj) -> Obj:
        group, version, plural = self._where(obj)
        meta = obj["metadata"]
        written: Obj = self.custom.replace_namespaced_custom_object(
            group, version, meta["namespace"], plural, meta["name"], obj
        )
        return written

    def delete(self, kind: str, namespace: str, name: str) -> None:
        group, version, plural = self._where(kind)
        self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name)

    def ensure_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": name}})
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise

    def events_for(self, namespace: str, name: str) -> list[Obj]:
        listed = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        return [e.to_dict() for e in listed.items]
