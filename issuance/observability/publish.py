"""The one way live updates leave the domain (docs/decisions/0003-publish-on-commit.md).

Saving a Certificate, CertificateRequest, Order, Challenge, Issuer or AcmeServer queues a
small typed message (post_save, connected in IssuanceConfig.ready(), so controllers need no
changes). Messages wait in a per-transaction batch and leave only after the transaction
commits: a rollback sends nothing, and an object saved five times in one transaction sends
one message with its last state. Subscribers (the console's channel-layer sender) get
`(topic, message)`; topics are `dashboard`, `certificate:<name>` and `bulk:<id>`.

Mirrored cert-manager objects (ClusterResource, ClusterEvent; issuance/kubernetes/certmanager/) are
published to `k8s`, `k8s:<cluster>` and `k8s:<cluster>/<namespace>` (scope.topics_for), and
a Cluster's connection state to `k8s` and `k8s:<cluster>`. A re-list stores thousands of
objects in one transaction: above MIRROR_DETAIL_LIMIT changes, each topic gets one
`mirror.many` summary instead of a message per object (browsers re-fetch either way).

Messages carry absolute timestamps (ISO 8601) so browsers count down locally, and `at`, the
moment they were published.

Known limit: if an object is saved inside a savepoint that is rolled back while the outer
transaction commits, the batch still holds the rolled-back snapshot. Browsers re-fetch the
page parts from the database when a message arrives, so they still show committed state.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_init, post_save
from django.utils import timezone

from issuance.access.scope import topics_for
from issuance.availability import is_unavailable_error, one_line
from issuance.models import (
    AcmeServer,
    Certificate,
    CertificateRequest,
    Challenge,
    Cluster,
    ClusterEvent,
    ClusterResource,
    Event,
    Issuer,
    Order,
)

log = logging.getLogger("issuance.observability.publish")

DASHBOARD = "dashboard"
Message = dict[str, Any]
Subscriber = Callable[[str, Message], None]

# Saves that only touch these columns are worker bookkeeping, not news for a browser.
_BOOKKEEPING = frozenset(
    {"due_at", "lease_owner", "lease_until", "wake_seq", "error_count", "last_error", "updated_at"}
)

_subscribers: list[Subscriber] = []
_local = threading.local()


def certificate_topic(name: str) -> str:
    return f"certificate:{name}"


BULK_PREFIX = "bulk:"


def bulk_topic(action_id: uuid.UUID | str) -> str:
    """A bulk action's progress (issuance/operations/bulk.py): one topic per action, by its id."""
    return f"{BULK_PREFIX}{uuid.UUID(str(action_id)).hex}"


def subscribe(callback: Subscriber) -> None:
    if callback not in _subscribers:
        _subscribers.append(callback)


def unsubscribe(callback: Subscriber) -> None:
    if callback in _subscribers:
        _subscribers.remove(callback)


def unsubscribe_all() -> None:
    """No live updates from this process (a worker whose channel layer cannot reach browsers):
    saves then cost nothing here, not even the owner look-ups after commit."""
    _subscribers.clear()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# -- the per-transaction batch --------------------------------------------------------------


class _Batch:
    """What one transaction will publish: the latest message per object, in first-save order."""

    def __init__(self) -> None:
        # key -> (topics, message)
        self.items: dict[tuple[str, Any], tuple[tuple[str, ...], Message]] = {}
        self.nudge_kinds: set[str] = set()
        # Keys whose owning certificate is looked up after commit (kind -> primary keys).
        self.owned: dict[str, set[Any]] = {}
        # Mirrored objects: key -> (cluster id, namespace, message); topics chosen at flush.
        self.mirror: dict[tuple[str, Any], tuple[int, str, Message]] = {}
        # Cluster names known while queueing (a cluster deleted in this transaction is gone
        # from the database by the time the batch is flushed).
        self.cluster_names: dict[int, str] = {}

    def flush(self) -> None:
        if not _subscribers:
            return
        try:
            owners = _owner_names(self.owned)
        except Exception as exc:  # the database may be gone (an outage, shutdown): send the rest
            if is_unavailable_error(exc):  # the outage is logged once elsewhere: no traceback
                log.warning("live update: owning certificates not resolved (%s)", one_line(exc))
            else:
                log.exception("live update: cannot resolve owning certificates")
            owners = {}
        now = timezone.now().isoformat()
        for key, (topics, message) in self.items.items():
            targets = list(topics)
            extra: Message = {"at": now}
            owner = owners.get(key)
            if owner:
                targets.append(certificate_topic(owner))
                extra["certificate"] = owner
            for topic in targets:
                _deliver(topic, {**message, **extra})
        if self.nudge_kinds:
            _deliver(
                DASHBOARD,
                {"type": "dashboard.changed", "kinds": sorted(self.nudge_kinds), "at": now},
            )
        if self.mirror:
            _flush_mirror(self, now)


def _deliver(topic: str, message: Message) -> None:
    for callback in list(_subscribers):
        try:
            callback(topic, message)
        except Exception:  # a broken live channel must never break issuance
            log.exception("live update to %s failed", topic)


# How to reach the owning certificate's name from each kind (the links are immutable).
_OWNER_PATHS: dict[str, tuple[type[Model], str]] = {
    "CertificateRequest": (CertificateRequest, "certificate__name"),
    "Order": (Order, "request__certificate__name"),
    "Challenge": (Challenge, "order__request__certificate__name"),
}


def _owner_names(owned: dict[str, set[Any]]) -> dict[tuple[str, Any], str]:
    """Owning certificate names, one indexed query per kind, after commit (not in the
    transaction, which stays as short as the controller made it)."""
    owners: dict[tuple[str, Any], str] = {}
    for kind, pks in owned.items():
        model, path = _OWNER_PATHS[kind]
        rows = model._default_manager.filter(pk__in=list(pks)).values_list("pk", path)
        owners.update({(kind, pk): name for pk, name in rows if name})
    return owners


def _current_batch(using: str) -> _Batch | None:
    """The open transaction's batch, or None outside a transaction (send at once)."""
    conn = connections[using]
    if not conn.in_atomic_block:
        return None
    batches: dict[str, _Batch] = getattr(_local, "batches", None) or {}
    _local.batches = batches
    batch = batches.get(using)
    # A rollback (of the transaction, or of the savepoint the batch was opened in) drops its
    # flush from the commit hooks; such a batch is dead and a new one starts.
    if batch is None or not any(hook[1] == batch.flush for hook in conn.run_on_commit):
        batch = batches[using] = _Batch()
        transaction.on_commit(batch.flush, using=using)
    return batch


def _queue(
    using: str,
    key: tuple[str, Any] | None,
    topics: tuple[str, ...] = (),
    message: Message | None = None,
    *,
    owned: bool = False,
    nudge: str = "",
) -> None:
    """Put a message (and/or a dashboard nudge) in the transaction's batch.

    `owned`: also send it to the owning certificate's topic, looked up after commit.
    """
    if not _subscribers:
        return
    batch = _current_batch(using)
    run_now = batch is None
    if batch is None:
        batch = _Batch()
    if key is not None and message is not None:
        batch.items[key] = (topics, message)
        if owned:
            batch.owned.setdefault(key[0], set()).add(key[1])
    if nudge:
        batch.nudge_kinds.add(nudge)
    if run_now:
        batch.flush()


def _queue_mirror(
    using: str,
    key: tuple[str, Any],
    cluster_id: int,
    namespace: str,
    message: Message,
    cluster_name: str = "",
) -> None:
    """Put a mirrored object's message in the transaction's batch (topics by its cluster and
    namespace, resolved when the batch is flushed)."""
    if not _subscribers:
        return
    batch = _current_batch(using)
    run_now = batch is None
    if batch is None:
        batch = _Batch()
    batch.mirror[key] = (cluster_id, namespace, message)
    if cluster_name:
        batch.cluster_names[cluster_id] = cluster_name
    if run_now:
        batch.flush()


def send(topic: str, message: Message, *, key: Any = None, using: str = DEFAULT_DB_ALIAS) -> None:
    """Queue `message` for `topic` once the current transaction commits.

    Messages with the same `key` in one transaction collapse into the last one.
    """
    _queue(using, ("send", key if key is not None else object()), (topic,), message)


def bulk_updated(kind: str, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """For QuerySet.update() callers, which send no post_save: nudge the dashboard once."""
    _queue(using, None, nudge=kind)


# -- messages per resource ----------------------------------------------------------------


def certificate_message(cert: Certificate) -> Message:
    ready = cert.get_condition("Ready")
    return {
        "type": "certificate.status",
        "name": cert.name,
        "state": cert.state,
        "ready": bool(ready and ready.get("status") == "True"),
        "issuing": cert.condition_is("Issuing"),
        "notAfter": _iso(cert.not_after),
        "renewalTime": _iso(cert.renewal_time),
        "nextRetryTime": _iso(cert.next_retry_time),
        "failedIssuanceAttempts": cert.failed_issuance_attempts,
        "revision": cert.revision,
    }


def request_message(req: CertificateRequest) -> Message:
    return {
        "type": "request.status",
        "name": req.name,
        "certificate": None,
        "revision": req.revision,
        "approval": req.approval,
        "state": req.state,
    }


def order_message(order: Order) -> Message:
    return {
        "type": "order.status",
        "name": order.name,
        "certificate": None,
        "state": order.state,
        "reason": order.reason,
    }


def challenge_message(ch: Challenge) -> Message:
    return {
        "type": "challenge.status",
        "name": ch.name,
        "certificate": None,
        "dnsName": ch.dns_name,
        "challengeType": ch.type,
        "processing": ch.processing,
        "presented": ch.presented,
        "state": ch.state,
        "reason": ch.reason,
        "nextCheckAt": _iso(ch.next_check_at),
    }


def event_recorded(event: Event) -> None:
    """Called by issuance.observability.events.record(): the timeline entry, for the certificate's page."""
    payload = {
        "type": "event.recorded",
        "kind": event.kind,
        "name": event.name,
        "reason": event.reason,
        "message": event.message,
        "eventType": event.type,
        "actor": event.actor,
        "createdAt": event.created_at.isoformat(),
    }
    topic = certificate_topic(event.certificate_name) if event.certificate_name else DASHBOARD
    _queue(event._state.db or DEFAULT_DB_ALIAS, ("Event", event.pk), (topic,), payload)


# -- mirrored cert-manager objects (issuance/kubernetes/certmanager/) ------------------------------------

# More mirrored changes than this in one transaction (a re-list, a cluster removed): one
# `mirror.many` message per topic instead of one message per object and topic.
MIRROR_DETAIL_LIMIT = 50
# Event messages are nudges: the timeline is re-fetched, so a long message is cut here.
_MAX_EVENT_MESSAGE = 1024
# A Cluster save is news when one of these changed (not the sync's lease or last_sync).
_CLUSTER_WATCHED = ("state", "api_versions", "missing_permissions")


def resource_message(res: ClusterResource, *, deleted: bool = False) -> Message:
    """What a browser needs to decide whether its page changed; never the body."""
    return {
        "type": "mirror.changed",
        "kind": res.kind,
        "namespace": res.namespace,
        "name": res.name,
        "uid": res.uid,
        "certificate": res.certificate_name,
        "ready": res.ready,
        "reason": res.reason,
        "state": res.state,
        "failed_attempts": res.failed_attempts,
        "next_retry_at": _iso(res.next_retry_at),
        "renewal_time": _iso(res.renewal_time),
        "not_after": _iso(res.not_after),
        "deleted": deleted,
    }


def cluster_event_message(event: ClusterEvent, *, deleted: bool = False) -> Message:
    return {
        "type": "mirror.event",
        "namespace": event.namespace,
        "kind": event.involved_kind,
        "name": event.involved_name,
        "uid": event.involved_uid,
        "eventType": event.type,
        "reason": event.reason,
        "message": event.message[:_MAX_EVENT_MESSAGE],
        "count": event.count,
        "last_seen": _iso(event.last_seen),
        "deleted": deleted,
    }


def cluster_message(cluster: Cluster, *, deleted: bool = False) -> Message:
    """The connection state only: never the kubeconfig, nor last_error (it may quote the
    API server's address or its answer; the Clusters page shows it to whoever may see it)."""
    return {
        "type": "cluster.status",
        "cluster": cluster.name,
        "state": cluster.state,
        "deleted": deleted,
    }


def _cluster_names(batch: _Batch) -> dict[int, str]:
    names = dict(batch.cluster_names)
    unknown = {cid for cid, _, _ in batch.mirror.values()} - names.keys()
    if unknown:
        names.update(Cluster.objects.filter(pk__in=unknown).values_list("pk", "name"))
    return names


def _flush_mirror(batch: _Batch, now: str) -> None:
    try:
        names = _cluster_names(batch)
    except Exception:  # the database may be gone at shutdown
        log.exception("live update: cannot resolve cluster names")
        return
    changes = [
        (names[cid], namespace, message)
        for cid, namespace, message in batch.mirror.values()
        if cid in names
    ]
    if len(changes) <= MIRROR_DETAIL_LIMIT:
        for cluster, namespace, message in changes:
            full = {**message, "cluster": cluster, "at": now}
            for topic in topics_for(cluster, namespace):
                _deliver(topic, full)
        return
    for topic, summary in _summaries(changes).items():
        _deliver(topic, {**summary, "at": now})


def _summaries(changes: list[tuple[str, str, Message]]) -> dict[str, Message]:
    """One `mirror.many` per topic: how many objects changed, were deleted, and which kinds,
    plus how many events; the page re-fetches what it shows."""
    out: dict[str, Message] = {}
    for cluster, namespace, message in changes:
        for topic in topics_for(cluster, namespace):
            summary = out.get(topic)
            if summary is None:
                summary = out[topic] = _empty_summary(topic, cluster, namespace)
            if message["type"] == "mirror.event":
                summary["events"] += 1
            else:
                summary["deleted" if message["deleted"] else "changed"] += 1
                summary["kinds"].add(message["kind"])
    for summary in out.values():
        summary["kinds"] = sorted(summary["kinds"])
    return out


def _empty_summary(topic: str, cluster: str, namespace: str) -> Message:
    summary: Message = {"type": "mirror.many", "changed": 0, "deleted": 0, "events": 0}
    summary["kinds"] = set()
    if topic != "k8s":
        summary["cluster"] = cluster
    if "/" in topic:
        summary["namespace"] = namespace
    return summary


def _cluster_name_if_cached(instance: ClusterResource | ClusterEvent) -> str:
    """The cluster's name when the instance already holds its Cluster (no query)."""
    field = type(instance)._meta.get_field("cluster")
    if field.is_cached(instance):
        return str(instance.cluster.name)
    return ""


def _queue_mirrored(using: str, instance: Model, *, deleted: bool) -> None:
    if isinstance(instance, ClusterResource):
        message = resource_message(instance, deleted=deleted)
    elif isinstance(instance, ClusterEvent):
        message = cluster_event_message(instance, deleted=deleted)
    else:
        return
    key = (type(instance).__name__, instance.pk)
    name = _cluster_name_if_cached(instance)
    _queue_mirror(using, key, instance.cluster_id, instance.namespace, message, name)


def _cluster_snapshot(cluster: Cluster) -> tuple[Any, ...]:
    # __dict__: a deferred field is not loaded just to take the snapshot.
    return tuple(cluster.__dict__.get(field) for field in _CLUSTER_WATCHED)


# What a Cluster looked like when loaded (or last published), in the instance's __dict__.
_SNAPSHOT = "_live_snapshot"


def _on_cluster_init(sender: type[Model], instance: Cluster, **kwargs: Any) -> None:
    instance.__dict__[_SNAPSHOT] = _cluster_snapshot(instance)


def _on_cluster_save(sender: type[Model], instance: Cluster, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    try:
        snapshot = _cluster_snapshot(instance)
        if not kwargs.get("created") and snapshot == instance.__dict__.get(_SNAPSHOT):
            return
        instance.__dict__[_SNAPSHOT] = snapshot
        _queue_cluster(kwargs.get("using") or DEFAULT_DB_ALIAS, instance, deleted=False)
    except Exception:
        log.exception("live update for %s failed", instance)


def _queue_cluster(using: str, cluster: Cluster, *, deleted: bool) -> None:
    topics = tuple(topics_for(cluster.name, ""))
    _queue(using, ("Cluster", cluster.pk), topics, cluster_message(cluster, deleted=deleted))
    if _subscribers:
        batch = _current_batch(using)
        if batch is not None:  # its resources' deletions, flushed after this row is gone
            batch.cluster_names[cluster.pk] = cluster.name


# -- signal receivers -------------------------------------------------------------------------


def _is_bookkeeping(update_fields: Iterable[str] | None) -> bool:
    return update_fields is not None and set(update_fields) <= _BOOKKEEPING


def _on_save(sender: type[Model], instance: Model, **kwargs: Any) -> None:
    if kwargs.get("raw") or _is_bookkeeping(kwargs.get("update_fields")):
        return
    using: str = kwargs.get("using") or DEFAULT_DB_ALIAS
    try:
        _queue_instance(using, instance)
    except Exception:  # never let a live-update bug fail the save that triggered it
        log.exception("live update for %s failed", instance)


def _queue_instance(using: str, instance: Model) -> None:
    key = (type(instance).__name__, instance.pk)
    if isinstance(instance, ClusterResource | ClusterEvent):
        _queue_mirrored(using, instance, deleted=False)
    elif isinstance(instance, Certificate):
        topics = (DASHBOARD, certificate_topic(instance.name))
        _queue(using, key, topics, certificate_message(instance))
    elif isinstance(instance, CertificateRequest):
        _queue(using, key, (DASHBOARD,), request_message(instance), owned=True)
    elif isinstance(instance, Order):
        _queue(using, key, (), order_message(instance), owned=True, nudge="Order")
    elif isinstance(instance, Challenge):
        _queue(using, key, (), challenge_message(instance), owned=True, nudge="Challenge")
    else:  # Issuer, AcmeServer: the dashboard's summaries change
        _queue(using, None, nudge=type(instance).__name__)


def _on_delete(sender: type[Model], instance: Model, **kwargs: Any) -> None:
    using: str = kwargs.get("using") or DEFAULT_DB_ALIAS
    try:
        if isinstance(instance, ClusterResource | ClusterEvent):
            _queue_mirrored(using, instance, deleted=True)
        elif isinstance(instance, Cluster):
            _queue_cluster(using, instance, deleted=True)
        elif isinstance(instance, Certificate):
            message = {"type": "certificate.deleted", "name": instance.name}
            topics = (DASHBOARD, certificate_topic(instance.name))
            _queue(using, ("Certificate", instance.pk), topics, message)
        else:
            _queue(using, None, nudge=type(instance).__name__)
    except Exception:
        log.exception("live update for deleted %s failed", instance)


_MODELS: tuple[type[Model], ...] = (
    Certificate,
    CertificateRequest,
    Order,
    Challenge,
    Issuer,
    AcmeServer,
    ClusterResource,
    ClusterEvent,
)


def connect_signals() -> None:
    """Called once from IssuanceConfig.ready()."""
    for model in _MODELS:
        post_save.connect(_on_save, sender=model, dispatch_uid=f"publish-save-{model.__name__}")
    for model in (Certificate, Issuer, ClusterResource, ClusterEvent, Cluster):
        post_delete.connect(
            _on_delete, sender=model, dispatch_uid=f"publish-delete-{model.__name__}"
        )
    post_init.connect(_on_cluster_init, sender=Cluster, dispatch_uid="publish-init-Cluster")
    post_save.connect(_on_cluster_save, sender=Cluster, dispatch_uid="publish-save-Cluster")
