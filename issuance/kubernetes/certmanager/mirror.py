"""Storing what a cluster's watchers saw: ClusterResource and ClusterEvent rows.

Runs on the worker thread only (issuance/kubernetes/certmanager/sync.py drains the watchers' queue into
`apply`). Rows are written with Model.save() and deleted with Model.delete() /
queryset.delete(), never queryset.update(): issuance/observability/publish.py hooks post_save and
post_delete to tell browsers. A row is written only when the object's resourceVersion
changed (a re-list after a 410 or a restart rewrites nothing that did not change).

Mirrored objects are never reconciled here or anywhere else in the console: the columns are
read off the object (`derived`), and the next retry of a failed Certificate is computed as
cert-manager computes it (issuance/kubernetes/certmanager/retry.py).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from django.db.models import Model
from django.utils import timezone

from issuance.kubernetes.certmanager import kinds, retry
from issuance.kubernetes.json_client import Obj
from issuance.kubernetes.watcher import Batch
from issuance.models import Cluster, ClusterEvent, ClusterResource

EVENTS = "Event"  # the source name of the Events watcher's batches
# Who owns whom in cert-manager's chain, and so whose Certificate a child inherits.
CHILD_OF = {"CertificateRequest": "Order", "Order": "Challenge"}
OWNER_OF = {"Order": "CertificateRequest", "Challenge": "Order"}
ISSUER_TYPES = ("acme", "ca", "selfSigned", "vault", "venafi")


# -- reading an object ---------------------------------------------------------------------


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time from the API ("2026-01-02T03:04:05Z"); None when absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def condition(obj: Obj, type_: str) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return {}


def controller_owner(obj: Obj) -> dict[str, Any]:
    """The controlling ownerReference (cert-manager sets controller: true), else the first."""
    refs = [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r]
    for ref in refs:
        if ref.get("controller"):
            return dict(ref)
    return dict(refs[0]) if refs else {}


def fit(model: type[Model], column: str, value: Any) -> Any:
    """`value` cut to the column's max_length: an object in a cluster is not checked against
    our columns, and one overlong field must not stop its cluster's sync."""
    limit = getattr(model._meta.get_field(column), "max_length", None)
    return value[:limit] if isinstance(value, str) and limit else value


def stripped(obj: Obj) -> Obj:
    """The object as stored: metadata.managedFields (server bookkeeping, often the bulk of
    an object) removed."""
    body = copy.deepcopy(obj)
    (body.get("metadata") or {}).pop("managedFields", None)
    return body


def _ready(obj: Obj) -> dict[str, Any]:
    cond = condition(obj, "Ready")
    return {
        "ready": str(cond.get("status") or ""),
        "reason": str(cond.get("reason") or ""),
        "message": str(cond.get("message") or ""),
    }


def _issuer(obj: Obj) -> dict[str, Any]:
    ref = (obj.get("spec") or {}).get("issuerRef") or {}
    if not ref.get("name"):
        return {"issuer_name": "", "issuer_kind": ""}
    return {"issuer_name": str(ref["name"]), "issuer_kind": str(ref.get("kind") or "Issuer")}


def _attempts(obj: Obj) -> int | None:
    value = (obj.get("status") or {}).get("failedIssuanceAttempts")
    return value if isinstance(value, int) and value >= 0 else None


def _certificate(obj: Obj, cluster: Cluster) -> dict[str, Any]:
    status = obj.get("status") or {}
    out = {**_ready(obj), **_issuer(obj)}
    issuing = condition(obj, "Issuing")
    if issuing.get("status") == "False" and issuing.get("reason") == "Failed":
        out["message"] = str(issuing.get("message") or out["message"])  # why it failed
    attempts, failed_at = _attempts(obj), timestamp(status.get("lastFailureTime"))
    out.update(
        certificate_name=str(obj["metadata"].get("name") or ""),
        not_after=timestamp(status.get("notAfter")),
        renewal_time=timestamp(status.get("renewalTime")),
        failed_attempts=attempts or 0,
        last_failure_time=failed_at,
        next_retry_at=retry.next_retry(
            failed_at, attempts, cluster.min_backoff_seconds, cluster.max_backoff_seconds
        ),
    )
    return out


def _owner(obj: Obj) -> dict[str, Any]:
    ref = controller_owner(obj)
    return {"owner_kind": str(ref.get("kind") or ""), "owner_name": str(ref.get("name") or "")}


def _request(obj: Obj) -> dict[str, Any]:
    out = {**_ready(obj), **_issuer(obj), **_owner(obj)}
    out["state"] = next(
        (d for d in ("Approved", "Denied") if condition(obj, d).get("status") == "True"), ""
    )
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    name = annotations.get("cert-manager.io/certificate-name")
    if not name and out["owner_kind"] == "Certificate":
        name = out["owner_name"]
    out["certificate_name"] = str(name or "")
    return out


def _acme(obj: Obj) -> dict[str, Any]:
    """Orders and Challenges: status.state, the error in status.reason, the owner."""
    status = obj.get("status") or {}
    return {
        **_issuer(obj),
        **_owner(obj),
        "state": str(status.get("state") or ""),
        "reason": str(status.get("reason") or "")[:128],
        "message": str(status.get("reason") or ""),
    }


def _issuer_object(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {**_ready(obj), "state": next((t for t in ISSUER_TYPES if t in spec), "")}


def derived(kind: str, obj: Obj, cluster: Cluster) -> dict[str, Any]:
    """The ClusterResource columns read off `obj` (not the ones that need other rows: an
    Order's or Challenge's certificate_name comes through its owner, see `_inherit`)."""
    if kind == "Certificate":
        return _certificate(obj, cluster)
    if kind == "CertificateRequest":
        return _request(obj)
    if kind in ("Order", "Challenge"):
        return _acme(obj)
    return _issuer_object(obj)


# -- storing -------------------------------------------------------------------------------

BLANK = {
    "ready": "",
    "reason": "",
    "message": "",
    "state": "",
    "issuer_name": "",
    "issuer_kind": "",
    "owner_kind": "",
    "owner_name": "",
    "certificate_name": "",
    "not_after": None,
    "renewal_time": None,
    "failed_attempts": 0,
    "last_failure_time": None,
    "next_retry_at": None,
}


def apply(cluster: Cluster, batch: Batch) -> int:
    """One queued batch (a full list or one watch event) of `batch.source`; rows written."""
    if batch.source == EVENTS:
        return sum(observe_event(cluster, obj) for obj in batch.objects)
    kind = kinds.BY_KIND[batch.source].kind
    if batch.kind == "LIST":
        return _reconcile_list(cluster, kind, batch.objects)
    if batch.kind == "DELETED":
        return sum(forget(cluster, _uid(obj)) for obj in batch.objects)
    return sum(observe(cluster, kind, obj) is not None for obj in batch.objects)


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _reconcile_list(cluster: Cluster, kind: str, objects: list[Obj]) -> int:
    """A full list: upsert what changed, delete rows of this kind the cluster no longer has."""
    rows = {r.uid: r for r in ClusterResource.objects.filter(cluster=cluster, kind=kind)}
    written = sum(observe(cluster, kind, obj, rows.get(_uid(obj))) is not None for obj in objects)
    present = {_uid(obj) for obj in objects}
    for uid in set(rows) - present:
        written += forget(cluster, uid, rows[uid])
    return written


def observe(
    cluster: Cluster, kind: str, obj: Obj, row: ClusterResource | None = None
) -> ClusterResource | None:
    """Upsert the row of one object (ADDED, MODIFIED or listed); None if nothing changed."""
    meta = obj.get("metadata") or {}
    uid, version = _uid(obj), str(meta.get("resourceVersion") or "")
    if not uid:
        return None
    if row is None:
        row = ClusterResource.objects.filter(cluster=cluster, uid=uid).first()
    if row is not None and version and row.resource_version == version:
        return None
    row = row or ClusterResource(cluster=cluster, uid=uid)
    row.kind, row.namespace = kind, str(meta.get("namespace") or "")
    row.name = fit(ClusterResource, "name", str(meta.get("name") or ""))
    row.resource_version, row.body = version, stripped(obj)
    for column, value in {**BLANK, **derived(kind, obj, cluster)}.items():
        setattr(row, column, fit(ClusterResource, column, value))
    if kind in OWNER_OF:
        row.certificate_name = _inherit(row)
    row.observed_at = timezone.now()
    row.save()
    if kind in CHILD_OF:
        _fill_children(row)
    return row


def _inherit(row: ClusterResource) -> str:
    """An Order's or Challenge's Certificate: its owner's (blank until the owner arrives)."""
    if row.owner_kind != OWNER_OF[row.kind]:
        return ""
    owner = (
        ClusterResource.objects.filter(
            cluster_id=row.cluster_id,
            kind=row.owner_kind,
            namespace=row.namespace,
            name=row.owner_name,
        )
        .values_list("certificate_name", flat=True)
        .first()
    )
    return owner or ""


def _fill_children(owner: ClusterResource) -> None:
    """Children that arrived before their owner (or whose owner changed Certificate) get its
    certificate_name, and their children in turn."""
    children = ClusterResource.objects.filter(
        cluster_id=owner.cluster_id,
        kind=CHILD_OF[owner.kind],
        namespace=owner.namespace,
        owner_kind=owner.kind,
        owner_name=owner.name,
    ).exclude(certificate_name=owner.certificate_name)
    for child in children:
        child.certificate_name = owner.certificate_name
        child.save(update_fields=["certificate_name"])
        if child.kind in CHILD_OF:
            _fill_children(child)


def forget(cluster: Cluster, uid: str, row: ClusterResource | None = None) -> int:
    """A deleted object: its row goes, and the Events about it (its timeline) with it."""
    if row is None:
        row = ClusterResource.objects.filter(cluster=cluster, uid=uid).first()
    if row is None:
        return 0
    ClusterEvent.objects.filter(cluster=cluster, involved_uid=uid).delete()
    row.delete()
    return 1


def recompute_retries(cluster: Cluster) -> int:
    """After an operator changed the cluster's backoff settings: every failed Certificate's
    next retry again. Returns the rows changed."""
    changed = 0
    failed = ClusterResource.objects.filter(
        cluster=cluster, kind="Certificate", last_failure_time__isnull=False
    )
    for row in failed:
        when = retry.next_retry(
            row.last_failure_time,
            _attempts(row.body),
            cluster.min_backoff_seconds,
            cluster.max_backoff_seconds,
        )
        if when != row.next_retry_at:
            row.next_retry_at = when
            row.save(update_fields=["next_retry_at"])
            changed += 1
    return changed


# -- Events ----------------------------------------------------------------------------------


def _first(*values: Any) -> datetime | None:
    return next((t for t in (timestamp(v) for v in values) if t is not None), None)


def event_columns(obj: Obj) -> dict[str, Any]:
    """ClusterEvent columns from a core/v1 Event (old-style count/timestamps or series)."""
    meta, involved = obj.get("metadata") or {}, obj.get("involvedObject") or {}
    source, series = obj.get("source") or {}, obj.get("series") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    where = source.get("host") or obj.get("reportingInstance") or ""
    created = meta.get("creationTimestamp")
    return {
        "namespace": str(meta.get("namespace") or involved.get("namespace") or ""),
        "involved_kind": str(involved.get("kind") or ""),
        "involved_name": str(involved.get("name") or ""),
        "involved_uid": str(involved.get("uid") or ""),
        "type": str(obj.get("type") or "Normal"),
        "reason": str(obj.get("reason") or "")[:128],
        "message": str(obj.get("message") or ""),
        "source": f"{component}, {where}" if component and where else str(component or where),
        "count": int(obj.get("count") or series.get("count") or 1),
        "first_seen": _first(obj.get("firstTimestamp"), obj.get("eventTime"), created),
        "last_seen": _first(
            obj.get("lastTimestamp"), series.get("lastObservedTime"), obj.get("eventTime"), created
        )
        or timezone.now(),
    }


def observe_event(cluster: Cluster, obj: Obj) -> int:
    """Upsert one Event (from a list or ADDED/MODIFIED). Events the API server expires are
    kept: they stay the object's timeline until the object itself is deleted."""
    uid, version = _uid(obj), str((obj.get("metadata") or {}).get("resourceVersion") or "")
    if not uid:
        return 0
    row = ClusterEvent.objects.filter(cluster=cluster, uid=uid).first()
    if row is not None and version and row.resource_version == version:
        return 0
    row = row or ClusterEvent(cluster=cluster, uid=uid)
    row.resource_version = version
    for column, value in event_columns(obj).items():
        setattr(row, column, fit(ClusterEvent, column, value))
    row.save()
    return 1
