"""Mirroring Kubernetes CSRs into the approval queue as CertificateRequests (source kubernetes).

Idempotent: one KubeCSR (unique by CSR uid) and one CertificateRequest per CSR, however
often a list or watch delivers it. Decisions made in the cluster (`kubectl certificate
approve`) are carried over to the request, so both sides agree.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction

from issuance.kubernetes.csr_connector.config import issuer_for_signer
from issuance.kubernetes.json_client import Obj
from issuance.models import Approval, CertificateRequest, Event, Issuer, KubeCSR
from issuance.observability import events
from issuance.operations import actions
from issuance.shapes import CertificateRequestSpec
from issuance.timing.durations import format_duration
from issuance.worker.wakeup import wake

log = logging.getLogger("issuance.kubernetes.csr_connector")
SOURCE = "kubernetes"
CLUSTER_ACTOR = "kubernetes"


def decision_of(obj: Obj) -> tuple[str, dict[str, Any]]:
    """("Approved" | "Denied" | "", the condition) from a CSR's status.conditions."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Approved", "Denied") and cond.get("status", "True") == "True":
            return str(cond["type"]), dict(cond)
    return "", {}


def request_name(csr_name: str, uid: str) -> str:
    # The uid part keeps a re-created CSR with the same name from colliding.
    return f"k8s-{csr_name[:230].rstrip('-.')}-{uid.replace('-', '')[:8]}"


def _pem(spec: Obj) -> str:
    try:
        return base64.b64decode(str(spec.get("request") or ""), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""  # stored as is: the approval policy denies an unreadable CSR


def request_spec(obj: Obj, issuer: Issuer) -> CertificateRequestSpec:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    out: CertificateRequestSpec = {
        "request": _pem(spec),
        "issuerRef": {"name": issuer.name, "kind": "Issuer"},
        "signerName": spec.get("signerName", ""),
        "usages": list(spec.get("usages") or []),
        "username": spec.get("username", ""),
        "groups": list(spec.get("groups") or []),
        "kubernetes": {"name": meta.get("name", ""), "uid": meta.get("uid", "")},
    }
    if spec.get("uid"):
        out["uid"] = spec["uid"]
    if spec.get("extra"):
        out["extra"] = spec["extra"]
    # certificates.k8s.io/v1 has spec.expirationSeconds since 1.22; older servers never
    # send it and the issuer's default duration applies.
    seconds = spec.get("expirationSeconds")
    if isinstance(seconds, int) and seconds > 0:
        out["expirationSeconds"] = seconds
        out["duration"] = format_duration(timedelta(seconds=seconds))
    return out


def observe(obj: Obj) -> KubeCSR | None:
    """Upsert the mirror of one CSR (from a list or an ADDED/MODIFIED event)."""
    meta = obj.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid:
        return None
    row = KubeCSR.objects.select_related("request").filter(uid=uid).first()
    if row is None:
        row = _create(obj)
        if row is None:
            return None
    version = str(meta.get("resourceVersion") or "")
    if version and version != row.resource_version:
        KubeCSR.objects.filter(pk=row.pk).update(resource_version=version)
        row.resource_version = version
    _carry_cluster_decision(row, obj)
    if (obj.get("status") or {}).get("certificate") and not row.certificate_written:
        KubeCSR.objects.filter(pk=row.pk).update(certificate_written=True)
        row.certificate_written = True
    return row


def _create(obj: Obj) -> KubeCSR | None:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    signer = str(spec.get("signerName") or "")
    issuer_name = issuer_for_signer(signer)
    if issuer_name is None:
        return None  # not ours: kube-controller-manager or another signer handles it
    issuer = Issuer.objects.filter(name=issuer_name).first()
    if issuer is None:
        log.warning(
            "CSR %s: signer %s maps to unknown issuer %s", meta["name"], signer, issuer_name
        )
        return None
    try:
        with transaction.atomic():
            request = CertificateRequest.objects.create(
                name=request_name(meta["name"], meta["uid"]),
                spec=request_spec(obj, issuer),
                issuer=issuer,
                requester=str(spec.get("username") or ""),
                source=SOURCE,
            )
            row = KubeCSR.objects.create(
                uid=meta["uid"],
                csr_name=meta["name"],
                request=request,
                signer_name=signer,
                resource_version=str(meta.get("resourceVersion") or ""),
            )
            events.record(
                "CertificateRequest",
                request.name,
                "Mirrored",
                f"From Kubernetes CertificateSigningRequest {meta['name']} "
                f"(signer {signer}, requested by {request.requester or 'unknown'})",
                actor=CLUSTER_ACTOR,
            )
            wake(request)
    except IntegrityError:
        # Another connector mirrored it meanwhile (unique uid): use theirs.
        return KubeCSR.objects.select_related("request").filter(uid=meta["uid"]).first()
    return row


def _carry_cluster_decision(row: KubeCSR, obj: Obj) -> None:
    decision, cond = decision_of(obj)
    if not decision or row.cluster_decision == decision:
        return
    KubeCSR.objects.filter(pk=row.pk).update(cluster_decision=decision)
    row.cluster_decision = decision
    request = row.request
    if request.approval != Approval.PENDING:
        if request.approval != decision:
            events.record(
                "CertificateRequest",
                request.name,
                "DecisionConflict",
                f"The CSR was {decision} in the cluster but {request.approval} here",
                type_=Event.WARNING,
                actor=CLUSTER_ACTOR,
            )
        return
    reason = str(cond.get("reason") or decision)
    message = f"{decision} in the cluster" + (f": {cond['message']}" if cond.get("message") else "")
    act = actions.approve if decision == Approval.APPROVED else actions.deny
    # Decided here at the same moment: the write-back reports the conflict.
    with contextlib.suppress(actions.ActionError):
        act(request, CLUSTER_ACTOR, reason, message)
    request.refresh_from_db()


def forget(obj: Obj) -> None:
    """A DELETED event (or absent from a re-list): a pending request can never be used."""
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    row = KubeCSR.objects.select_related("request").filter(uid=uid, deleted=False).first()
    if row is None:
        return
    KubeCSR.objects.filter(pk=row.pk).update(deleted=True)
    row.deleted = True
    if row.request.approval == Approval.PENDING:
        with contextlib.suppress(actions.ActionError):
            actions.deny(
                row.request,
                CLUSTER_ACTOR,
                "CSRDeleted",
                f"CertificateSigningRequest {row.csr_name} was deleted from the cluster",
            )


def forget_missing(present_uids: set[str]) -> int:
    """After a full list: mirrors whose CSR no longer exists."""
    gone = KubeCSR.objects.filter(deleted=False).exclude(uid__in=present_uids)
    count = 0
    for uid in list(gone.values_list("uid", flat=True)):
        forget({"metadata": {"uid": uid}})
        count += 1
    return count
