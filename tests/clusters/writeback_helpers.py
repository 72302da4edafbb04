"""Shared by the write-back and action tests: a Cluster row for a test cluster, and a
ClusterResource row for an object created in it (the mirror is the sync's; these tests make
the row directly, with the object's real uid)."""

from __future__ import annotations

from typing import Any

from issuance.models import Cluster, ClusterResource

Obj = dict[str, Any]


def mirrored(cluster: Cluster, obj: Obj) -> ClusterResource:
    """The row the mirror would store for `obj` (only what actions read)."""
    meta = obj["metadata"]
    status = obj.get("status") or {}
    decided = [
        c["type"]
        for c in status.get("conditions") or []
        if c.get("type") in {"Approved", "Denied"} and c.get("status") == "True"
    ]
    return ClusterResource.objects.create(
        cluster=cluster,
        kind=obj["kind"],
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta.get("resourceVersion", ""),
        body=obj,
        state=decided[0] if obj["kind"] == "CertificateRequest" and decided else "",
        certificate_name=(meta.get("annotations") or {}).get(
            "cert-manager.io/certificate-name", meta["name"] if obj["kind"] == "Certificate" else ""
        ),
    )


def condition(obj: Obj, type_: str) -> list[Obj]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_]
