"""Renew, approve and deny for mirrored cert-manager objects (written back by writeback.py).

Each function checks the user's role and scope (the role must be granted and the object's
cluster/namespace inside the user's scope), refuses what cmctl refuses (renewing a
Certificate that is already being issued, deciding a CertificateRequest that is already
decided), then stores a ClusterAction and the audit Event in one transaction and wakes the
worker after the commit: the cluster's sync step carries the action out within about a
second, or later when the API server is unreachable (nothing is lost meanwhile).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_save

from issuance.access import scope
from issuance.access.roles import APPROVER, OPERATOR
from issuance.models import (
    Cluster,
    ClusterAction,
    ClusterActionKind,
    ClusterActionState,
    ClusterResource,
    Event,
    MirroredKind,
)
from issuance.observability import events
from issuance.operations.actions import ActionError
from issuance.worker.wakeup import request_steps, woken

APPROVED, DENIED = "Approved", "Denied"
RENEW_REASON = "ManuallyTriggered"  # cmctl renew's reason
DEFAULT_REASONS = {APPROVED: "ManuallyApproved", DENIED: "ManuallyDenied"}


def wake() -> None:
    """After the commit: every worker, in this process or another, runs its steps at once,
    the cluster sync among them, which carries the action out (also used by the clusters
    API after an add, a change or a check)."""
    woken()
    request_steps()


# A Cluster saved with any of these (a new cluster, new credentials, other backoff settings)
# makes every worker run the sync at once, after the commit, whichever way the change came:
# the page, the API, `manage.py cluster` or code. An idle worker would otherwise look only
# after its 30 s idle cap. The sync's own saves (state, last sync) name other fields.
SYNC_FIELDS = frozenset(
    {"kubeconfig_ciphertext", "context", "min_backoff_seconds", "max_backoff_seconds"}
)


def _cluster_saved(
    sender: type[Cluster],
    instance: Cluster,
    created: bool,
    update_fields: frozenset[str] | None,
    **kwargs: Any,
) -> None:
    if created or update_fields is None or SYNC_FIELDS.intersection(update_fields):
        request_steps()


def connect_signals() -> None:
    post_save.connect(_cluster_saved, sender=Cluster, dispatch_uid="cluster-sync-wake")


class NotAllowed(ActionError):
    """The user lacks the role for this object's cluster/namespace (the API answers 403)."""


def path_of(cluster: str, namespace: str, name: str) -> str:
    """How the audit log names a mirrored object: `<cluster>/<namespace>/<name>`. Its
    `certificate_name` stays empty: that is the console's own certificates' timeline (and
    live topic); a mirrored object's entries are found by kind and this name."""
    return f"{cluster}/{namespace}/{name}" if namespace else f"{cluster}/{name}"


def _actor(user: Any) -> str:
    return str(user.get_username())


def _check_role(user: Any, role: str, resource: ClusterResource) -> None:
    if not scope.has_scoped_role(user, role, resource.cluster.name, resource.namespace):
        raise NotAllowed(
            f"{_actor(user)} does not hold the {role} role for "
            f"{path_of(resource.cluster.name, resource.namespace, '')}"
        )


def _locked(resource: ClusterResource) -> ClusterResource:
    """The mirrored row, locked: two requests for the same object queue one action."""
    try:
        return (
            ClusterResource.objects.select_for_update()
            .select_related("cluster")
            .get(pk=resource.pk)
        )
    except ClusterResource.DoesNotExist:
        raise ActionError(
            f"{resource.kind} {resource.namespace}/{resource.name} is gone from the cluster"
        ) from None


def _pending(resource: ClusterResource, actions: tuple[str, ...]) -> ClusterAction | None:
    return ClusterAction.objects.filter(
        cluster_id=resource.cluster_id,
        uid=resource.uid,
        action__in=actions,
        state=ClusterActionState.PENDING,
    ).first()


def _queue(
    resource: ClusterResource, action: str, actor: str, reason: str, message: str
) -> ClusterAction:
    return ClusterAction.objects.create(
        cluster_id=resource.cluster_id,
        action=action,
        kind=resource.kind,
        namespace=resource.namespace,
        name=resource.name,
        uid=resource.uid,
        actor=actor,
        reason=reason[:128],
        message=message,
    )


def request_renew(resource: ClusterResource, user: Any, message: str = "") -> ClusterAction:
    """Queue a force renewal (cmctl renew): the Issuing condition, written by the worker."""
    if resource.kind != MirroredKind.CERTIFICATE:
        raise ActionError(f"only a Certificate can be renewed, not a {resource.kind}")
    _check_role(user, OPERATOR, resource)
    actor = _actor(user)
    with transaction.atomic():
        row = _locked(resource)
        where = path_of(row.cluster.name, row.namespace, row.name)
        if any(c.get("type") == "Issuing" and c.get("status") == "True" for c in row.conditions):
            raise ActionError(f"Certificate {where} is already being issued (Issuing=True)")
        queued = _pending(row, (ClusterActionKind.RENEW,))
        if queued is not None:
            raise ActionError(
                f"a renewal of Certificate {where} is already queued by {queued.actor}"
            )
        action = _queue(row, ClusterActionKind.RENEW, actor, RENEW_REASON, message)
        events.record(
            MirroredKind.CERTIFICATE,
            where,
            RENEW_REASON,
            "Force renewal requested" + (f": {message}" if message else ""),
            actor=actor,
        )
        wake()
    return action


def request_decision(
    resource: ClusterResource, user: Any, decision: str, reason: str = "", message: str = ""
) -> ClusterAction:
    """Queue an approval or denial (cmctl approve/deny); `decision` is "Approved" or "Denied".
    Final, as in cert-manager: a request already decided (in the mirror, or by an action
    still queued) is refused."""
    if decision not in DEFAULT_REASONS:
        raise ValueError(f"decision must be {APPROVED} or {DENIED}, not {decision!r}")
    if resource.kind != MirroredKind.CERTIFICATE_REQUEST:
        raise ActionError(
            f"only a CertificateRequest can be approved or denied, not a {resource.kind}"
        )
    _check_role(user, APPROVER, resource)
    actor = _actor(user)
    reason = reason or DEFAULT_REASONS[decision]
    with transaction.atomic():
        row = _locked(resource)
        where = path_of(row.cluster.name, row.namespace, row.name)
        if row.state in DEFAULT_REASONS:
            raise ActionError(
                f"CertificateRequest {where} is already {row.state}; approval and denial are final"
            )
        queued = _pending(row, (ClusterActionKind.APPROVE, ClusterActionKind.DENY))
        if queued is not None:
            raise ActionError(
                f"CertificateRequest {where} already has a decision queued "
                f"({queued.action} by {queued.actor})"
            )
        kind = ClusterActionKind.APPROVE if decision == APPROVED else ClusterActionKind.DENY
        action = _queue(row, kind, actor, reason, message)
        # As the console's own approve/deny (issuance.operations.actions._record_decision) records it.
        events.record(
            MirroredKind.CERTIFICATE_REQUEST,
            where,
            decision,
            f"{reason}: {message}" if message else reason,
            type_=Event.NORMAL if decision == APPROVED else Event.WARNING,
            actor=actor,
        )
        wake()
    return action
