"""Writing decisions and certificates back to Kubernetes CSRs.

Every write is read-modify-write with the object's resourceVersion: when someone else
changed the CSR in between, the API server answers 409 Conflict and the write is retried
on a fresh read (a bounded number of times; the next connector pass tries again).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable

from django.db.models import Q
from django.utils import timezone

from issuance.kubernetes.csr_connector.csr_api import KubeApi
from issuance.kubernetes.csr_connector.csr_mirror import decision_of
from issuance.kubernetes.json_client import ApiException, Obj
from issuance.models import Approval, Event, KubeCSR, RequestState
from issuance.observability import events

log = logging.getLogger("issuance.kubernetes.csr_connector")
MAX_CONFLICT_RETRIES = 5
# Tests set this to change the CSR between our read and our write (forcing a 409).
BEFORE_WRITE: Callable[[str, Obj], None] | None = None


class Gone(Exception):
    """The CSR no longer exists."""


def due_decisions() -> list[KubeCSR]:
    return list(
        KubeCSR.objects.select_related("request")
        .filter(deleted=False, cluster_decision="")
        .exclude(request__approval=Approval.PENDING)[:100]
    )


def due_certificates() -> list[KubeCSR]:
    return list(
        KubeCSR.objects.select_related("request")
        .filter(deleted=False, certificate_written=False, request__state=RequestState.ISSUED)
        .filter(Q(cluster_decision=Approval.APPROVED))[:100]
    )


def _read_modify_write(
    api: KubeApi,
    row: KubeCSR,
    modify: Callable[[Obj], bool],
    write: Callable[[str, Obj], Obj],
) -> tuple[Obj, int, bool]:
    """Returns (the CSR after the write, conflicts seen, whether we wrote). `modify` returns
    False when the object needs no write (someone else already did it)."""
    conflicts = 0
    while True:
        try:
            obj = api.read_csr(row.csr_name)
        except ApiException as exc:
            if exc.status == 404:
                raise Gone(row.csr_name) from None
            raise
        if (obj.get("metadata") or {}).get("uid") != row.uid:
            raise Gone(row.csr_name)  # same name, another object: ours was deleted
        if not modify(obj):
            return obj, conflicts, False
        if BEFORE_WRITE is not None:
            BEFORE_WRITE(row.csr_name, obj)
        try:
            return write(row.csr_name, obj), conflicts, True
        except ApiException as exc:
            if exc.status != 409 or conflicts >= MAX_CONFLICT_RETRIES:
                raise
            conflicts += 1
            log.info("CSR %s changed under us (409); re-reading", row.csr_name)


def write_decision(api: KubeApi, row: KubeCSR) -> int:
    """Add the Approved/Denied condition a person (or the policy) decided. Returns conflicts."""
    request = row.request
    decision = str(request.approval)
    cond = request.get_condition(decision)
    reason = (cond and cond.get("reason")) or decision
    said = (cond and cond.get("message")) or decision
    now = timezone.now().replace(microsecond=0).isoformat().replace("+00:00", "Z")

    def modify(obj: Obj) -> bool:
        existing, _ = decision_of(obj)
        if existing:
            return False
        status = obj.setdefault("status", {})
        status.setdefault("conditions", [])
        status["conditions"] = [
            *(status["conditions"] or []),
            {
                "type": decision,
                "status": "True",
                "reason": str(reason)[:128],
                "message": (f"{said} (by {request.decided_by or 'someone'} in Issuance Console)")[
                    :1000
                ],
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            },
        ]
        return True

    obj, conflicts, wrote = _read_modify_write(api, row, modify, api.replace_csr_approval)
    seen, _ = decision_of(obj)
    KubeCSR.objects.filter(pk=row.pk).update(
        cluster_decision=seen or decision, resource_version=_rv(obj), last_error=""
    )
    if seen and seen != decision:
        events.record(
            "CertificateRequest",
            request.name,
            "DecisionConflict",
            f"CSR {row.csr_name} was already {seen} in the cluster; {decision} here was not "
            "written",
            type_=Event.WARNING,
            actor="kubernetes",
        )
    elif wrote:  # else another worker wrote it a moment ago and said so
        events.record(
            "CertificateRequest",
            request.name,
            "DecisionWrittenBack",
            f"{decision} written to CertificateSigningRequest {row.csr_name}"
            + (f" after {conflicts} conflict(s)" if conflicts else ""),
            actor=request.decided_by,
        )
    return conflicts


def write_certificate(api: KubeApi, row: KubeCSR) -> int:
    """Put the signed chain into status.certificate. Returns conflicts."""
    pem = row.request.certificate_pem
    encoded = base64.b64encode(pem.encode()).decode()

    def modify(obj: Obj) -> bool:
        status = obj.setdefault("status", {})
        if status.get("certificate"):
            return False
        status["certificate"] = encoded
        return True

    obj, conflicts, wrote = _read_modify_write(api, row, modify, api.replace_csr_status)
    KubeCSR.objects.filter(pk=row.pk).update(
        certificate_written=True, resource_version=_rv(obj), last_error=""
    )
    if not wrote:
        return conflicts
    events.record(
        "CertificateRequest",
        row.request.name,
        "CertificateWrittenBack",
        f"Signed certificate written to CertificateSigningRequest {row.csr_name}"
        + (f" after {conflicts} conflict(s)" if conflicts else ""),
    )
    return conflicts


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def record_failure(row: KubeCSR, exc: Exception) -> None:
    if isinstance(exc, Gone):
        KubeCSR.objects.filter(pk=row.pk).update(deleted=True, last_error="CSR deleted")
        return
    detail = f"{type(exc).__name__}: {getattr(exc, 'status', '')} {getattr(exc, 'reason', exc)}"
    KubeCSR.objects.filter(pk=row.pk).update(last_error=detail[:2000])
    log.warning("write-back to CSR %s failed: %s", row.csr_name, detail)
