"""Carrying out due ClusterActions against the cluster, as cmctl does.

- renew: set the Certificate's `Issuing` condition (True, ManuallyTriggered, a message naming
  who) through its `status` subresource; a Certificate already being issued is left alone.
- approve/deny: set the CertificateRequest's `Approved` or `Denied` condition through its
  `status` subresource; a request already decided in the cluster fails the action, naming
  what was found (approval is final in cert-manager).

Each write is read-modify-write with the object's resourceVersion: a 409 (someone changed
the object in between) reads again and retries, a bounded number of times. Each action
written is also recorded as a Kubernetes Event on the object, named after the action's id,
so a retry after a crash finds it (409 AlreadyExists) instead of adding another, and finds
our own condition already there instead of writing it twice. The outcome goes to the
console's audit log.

Permanent failures (the object deleted or replaced by another of the same name, a
forbidden write) mark the action Failed with the reason; transient ones (connection,
timeout, 5xx, 429) keep it Pending with `last_error` and a growing `next_attempt_at`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from issuance.kubernetes.certmanager import kubeconfig
from issuance.kubernetes.certmanager.cluster_actions import path_of
from issuance.kubernetes.certmanager.kinds import BY_KIND, CERT_MANAGER_GROUP, VERSION, Access
from issuance.kubernetes.json_client import REQUEST_TIMEOUT
from issuance.models import (
    Cluster,
    ClusterAction,
    ClusterActionKind,
    ClusterActionState,
    Event,
)
from issuance.observability import events

log = logging.getLogger("issuance.kubernetes.certmanager.writeback")

MAX_CONFLICT_RETRIES = 5
BATCH = 50  # actions per pass and cluster
# A transient failure waits 1 s, 2 s, 4 s … at most 5 min; after a day the action fails.
RETRY_MIN, RETRY_MAX = 1.0, 300.0
GIVE_UP_AFTER = timedelta(days=1)
EVENT_SOURCE = "issuance-console"
CONSOLE = "Issuance Console"

Obj = dict[str, Any]
# Tests set these: BEFORE_WRITE(action, obj) runs between our read and our write (to change
# the object and force a 409); AFTER(stage, action) after "written" (the status) and
# "recorded" (the Kubernetes Event), before the action is marked done (to simulate a crash).
BEFORE_WRITE: Callable[[ClusterAction, Obj], None] | None = None
AFTER: Callable[[str, ClusterAction], None] | None = None


class Permanent(Exception):
    """The action cannot be carried out (the message says why); it is marked Failed."""


class Conflicted(Exception):
    """Still 409 after MAX_CONFLICT_RETRIES fresh reads: tried again on a later pass."""

    def __init__(self, conflicts: int) -> None:
        super().__init__(f"the object kept changing under us ({conflicts} conflicts)")
        self.conflicts = conflicts


@dataclass(frozen=True)
class Outcome:
    wrote: bool  # False: found already done (by us before a crash, or by someone else)
    conflicts: int
    note: str = ""  # e.g. a Kubernetes Event we could not record


def run_due(cluster: Cluster) -> bool:
    """Carry out this cluster's due actions (the sync step calls it for clusters it holds).
    Returns did-work."""
    due = list(
        ClusterAction.objects.filter(
            cluster=cluster,
            state=ClusterActionState.PENDING,
            next_attempt_at__lte=timezone.now(),
        ).order_by("created_at")[:BATCH]
    )
    if not due:
        return False
    try:
        api = kubeconfig.api_client_for(cluster)
    except kubeconfig.KubeconfigError as exc:
        for action in due:
            _retry(cluster, action, f"the cluster's kubeconfig cannot be used: {exc.message}")
        return True
    unreachable = ""
    for action in due:
        if unreachable:  # one timeout per pass, not one per action
            _retry(cluster, action, unreachable)
            continue
        unreachable = _carry_out(cluster, api, action)
    return True


def _carry_out(cluster: Cluster, api: client.ApiClient, action: ClusterAction) -> str:
    """One action; returns the error when the API server could not be reached."""
    try:
        outcome = _write(api, action)
    except Permanent as exc:
        _fail(cluster, action, str(exc))
    except Conflicted as exc:
        _retry(cluster, action, str(exc), conflicts=exc.conflicts)
    except ApiException as exc:
        if exc.status in {403, 404}:  # the status write itself (reads are checked in _read)
            _fail(cluster, action, _permanent_message(action, exc, "update"))
        elif exc.status in {400, 422}:  # refused as invalid: the same body would be again
            _fail(cluster, action, f"the API server refused the write: {_api_detail(exc)}")
        else:
            _retry(cluster, action, _api_error(exc))
    except (HTTPError, OSError) as exc:
        error = f"cannot reach the API server: {type(exc).__name__}: {exc}"
        _retry(cluster, action, error)
        return error
    else:
        _done(cluster, action, outcome)
    return ""


# -- the write ------------------------------------------------------------------------------


def _write(api: client.ApiClient, action: ClusterAction) -> Outcome:
    custom: Any = client.CustomObjectsApi(api)
    conflicts = 0
    while True:
        obj = _read(custom, action)
        body = _modified(obj, action)
        if body is None:
            break
        if BEFORE_WRITE is not None:
            BEFORE_WRITE(action, obj)
        try:
            _replace_status(custom, action, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            conflicts += 1
            if conflicts > MAX_CONFLICT_RETRIES:
                raise Conflicted(conflicts) from None
            log.info("%s changed under us (409); reading it again", _where(action))
            continue
        if AFTER is not None:
            AFTER("written", action)
        break
    note = ""
    if body is not None or _already_ours(obj, action):  # else someone else did it: no Event
        note = _record_event(api, action, obj)
        if AFTER is not None:
            AFTER("recorded", action)
    return Outcome(wrote=body is not None, conflicts=conflicts, note=note)


def _read(custom: Any, action: ClusterAction) -> Obj:
    kind = BY_KIND[action.kind]
    try:
        obj: Obj = custom.get_namespaced_custom_object(
            kind.group,
            VERSION,
            action.namespace,
            kind.plural,
            action.name,
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as exc:
        if exc.status in {403, 404}:
            raise Permanent(_permanent_message(action, exc, "get")) from None
        raise
    uid = (obj.get("metadata") or {}).get("uid")
    if action.uid and uid != action.uid:
        raise Permanent(
            f"{_where(action)} was deleted and replaced by another object of the same name "
            f"(uid {uid}); nothing written"
        )
    return obj


def _replace_status(custom: Any, action: ClusterAction, body: Obj) -> None:
    kind = BY_KIND[action.kind]
    custom.replace_namespaced_custom_object_status(
        kind.group,
        VERSION,
        action.namespace,
        kind.plural,
        action.name,
        body,
        _request_timeout=REQUEST_TIMEOUT,
    )


def _permanent_message(action: ClusterAction, exc: ApiException, verb: str) -> str:
    if exc.status == 404:
        return f"{_where(action)} no longer exists in the cluster; nothing written"
    plural = BY_KIND[action.kind].plural
    access = (
        Access(verb, CERT_MANAGER_GROUP, plural, "status")
        if verb == "update"
        else Access(verb, BY_KIND[action.kind].group, plural)
    )
    return (
        f"forbidden: the cluster's kubeconfig may not {verb} {_where(action)}; grant "
        f"`{access}` (docs/rbac/issuance-console.yaml)"
    )


def _api_detail(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)


def _api_error(exc: ApiException) -> str:
    return f"API server answered {exc.status} {exc.reason}".strip()


# -- the conditions, as cmctl sets them -----------------------------------------------------


def _now() -> str:
    return timezone.now().replace(microsecond=0).isoformat().replace("+00:00", "Z")


def message_of(action: ClusterAction) -> str:
    """The condition's (and the Kubernetes Event's) message, naming who."""
    if action.action == ClusterActionKind.RENEW:
        text = f"Certificate re-issuance manually triggered by {action.actor} in {CONSOLE}"
    else:
        word = "approved" if action.action == ClusterActionKind.APPROVE else "denied"
        text = f"CertificateRequest manually {word} by {action.actor} in {CONSOLE}"
    return (f"{text}: {action.message}" if action.message else text)[:1000]


def condition_type(action: ClusterAction) -> str:
    return {
        ClusterActionKind.RENEW: "Issuing",
        ClusterActionKind.APPROVE: "Approved",
        ClusterActionKind.DENY: "Denied",
    }[ClusterActionKind(action.action)]


def _conditions(obj: Obj) -> list[Obj]:
    conds = (obj.get("status") or {}).get("conditions")
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _ours(cond: Obj, action: ClusterAction) -> bool:
    return cond.get("reason") == action.reason and cond.get("message") == message_of(action)


def _already_ours(obj: Obj, action: ClusterAction) -> bool:
    """Our condition is there: written by an earlier try of this action (a crash after it)."""
    wanted = condition_type(action)
    return any(
        c.get("type") == wanted and c.get("status") == "True" and _ours(c, action)
        for c in _conditions(obj)
    )


def _modified(obj: Obj, action: ClusterAction) -> Obj | None:
    """The object with our condition set (cmctl's SetCertificateCondition: replaces the
    condition of that type, or appends one); None when nothing is to be written."""
    conds = _conditions(obj)
    wanted = condition_type(action)
    if action.action == ClusterActionKind.RENEW:
        if any(c.get("type") == "Issuing" and c.get("status") == "True" for c in conds):
            return None  # being issued already (perhaps by our own write before a crash)
    else:
        decided = [
            c
            for c in conds
            if c.get("type") in {"Approved", "Denied"} and c.get("status") == "True"
        ]
        if decided:
            if decided[0].get("type") == wanted and _ours(decided[0], action):
                return None  # our own write, before a crash
            found = decided[0]
            raise Permanent(
                f"{_where(action)} is already {found.get('type')} in the cluster "
                f"(reason {found.get('reason') or '-'}: {found.get('message') or '-'}); "
                "approval and denial are final, nothing written"
            )
    now = _now()
    cond: Obj = {
        "type": wanted,
        "status": "True",
        "reason": action.reason,
        "message": message_of(action),
        "lastTransitionTime": now,
    }
    if action.action == ClusterActionKind.RENEW:
        cond["observedGeneration"] = (obj.get("metadata") or {}).get("generation") or 0
    kept = [c for c in conds if c.get("type") != wanted]
    status = dict(obj.get("status") or {})
    status["conditions"] = [*kept, cond]
    return {**obj, "status": status}


# -- the Kubernetes Event -------------------------------------------------------------------


def event_name(action: ClusterAction) -> str:
    """`<object>.<action id>`: a retry of the same action finds its Event (409)."""
    prefix = action.name[: 253 - 33].rstrip(".-")
    return f"{prefix}.{action.id.hex}"


def _record_event(api: client.ApiClient, action: ClusterAction, obj: Obj) -> str:
    """Create the Event (idempotent by name). Returns a note when it could not be made: the
    action itself is written, so that does not fail it."""
    meta = obj.get("metadata") or {}
    now = _now()
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(action), "namespace": action.namespace},
        "involvedObject": {
            "apiVersion": f"{BY_KIND[action.kind].group}/{VERSION}",
            "kind": action.kind,
            "name": action.name,
            "namespace": action.namespace,
            "uid": meta.get("uid") or action.uid,
            "resourceVersion": meta.get("resourceVersion") or "",
        },
        "reason": action.reason,
        "message": message_of(action),
        "type": "Warning" if action.action == ClusterActionKind.DENY else "Normal",
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": EVENT_SOURCE,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    core: Any = client.CoreV1Api(api)
    try:
        core.create_namespaced_event(action.namespace, body, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 409:
            return ""  # made by an earlier try of this action
        if exc.status == 403:
            return f"no Kubernetes Event recorded: grant `{Access('create', '', 'events')}`"
        raise
    return ""


# -- outcomes -------------------------------------------------------------------------------


def _where(action: ClusterAction) -> str:
    return f"{action.kind} {action.namespace}/{action.name}"


def _audit(
    cluster: Cluster, action: ClusterAction, reason: str, message: str, warning: bool
) -> None:
    events.record(
        action.kind,
        path_of(cluster.name, action.namespace, action.name),
        reason,
        message,
        type_=Event.WARNING if warning else Event.NORMAL,
        actor=action.actor,
    )


def _done(cluster: Cluster, action: ClusterAction, outcome: Outcome) -> None:
    cond = f"{condition_type(action)} condition"
    if outcome.wrote:
        said = f"{cond} written to {_where(action)} in cluster {cluster.name}" + (
            f" after {outcome.conflicts} conflict(s)" if outcome.conflicts else ""
        )
    elif action.action == ClusterActionKind.RENEW:
        said = f"{_where(action)} is already being issued in cluster {cluster.name}"
    else:
        said = f"{cond} already on {_where(action)} in cluster {cluster.name}"
    if outcome.note:
        said += f" ({outcome.note})"
    with transaction.atomic():
        ClusterAction.objects.filter(pk=action.pk).update(
            state=ClusterActionState.DONE,
            attempts=action.attempts + 1,
            conflicts=action.conflicts + outcome.conflicts,
            last_error=outcome.note,
            done_at=timezone.now(),
        )
        _audit(cluster, action, "WrittenToCluster", said, warning=False)


def _fail(cluster: Cluster, action: ClusterAction, error: str) -> None:
    log.warning("%s on cluster %s failed: %s", action.action, cluster.name, error)
    with transaction.atomic():
        ClusterAction.objects.filter(pk=action.pk).update(
            state=ClusterActionState.FAILED,
            attempts=action.attempts + 1,
            last_error=error[:2000],
            done_at=timezone.now(),
        )
        _audit(cluster, action, "WriteBackFailed", f"{action.action} failed: {error}", True)


def retry_delay(attempts: int) -> timedelta:
    """The pause after `attempts` transient failures in a row: 1 s, 2 s, 4 s … 5 min."""
    return timedelta(seconds=min(RETRY_MAX, RETRY_MIN * 2 ** min(attempts - 1, 30)))


def _retry(cluster: Cluster, action: ClusterAction, error: str, conflicts: int = 0) -> None:
    attempts = action.attempts + 1
    now = timezone.now()
    if now - action.created_at > GIVE_UP_AFTER:
        _fail(
            cluster,
            action,
            f"gave up after {attempts} attempts over {GIVE_UP_AFTER}: {error}",
        )
        return
    log.info("%s on %s: %s (attempt %d)", action.action, _where(action), error, attempts)
    next_at: datetime = now + retry_delay(attempts)
    ClusterAction.objects.filter(pk=action.pk).update(
        attempts=attempts,
        conflicts=action.conflicts + conflicts,
        last_error=error[:2000],
        next_attempt_at=next_at,
    )
