"""Bulk actions on certificates (renew or delete many), carried out chunk by chunk.

Design (see also models/bulkaction.py): a bulk action is stored first, one BulkItem per
certificate, and then carried out CHUNK items per call of run_chunk(), each call one short
transaction that acts through issuance/operations/actions.py (force_renew_many, delete_certificates: a
constant number of statements per chunk, not per certificate), stores every item's result
and the action's counters, and publishes the progress on commit (topic `bulk:<id>`, message
type `bulk.progress`). The console calls run_chunk() from short requests that the progress
page makes one after another (and a "Continue" button without JavaScript): no request
runs for minutes, the worker's reconcile loop stays for resources, and an action cut off
anywhere (a closed tab, a crashed server) has lost nothing: the committed items are done,
the rest are pending, and opening its page again goes on from there.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from issuance.access.roles import ADMIN, has_role
from issuance.models import BulkAction, BulkItem, BulkKind, ItemState
from issuance.observability import publish
from issuance.operations import actions

CHUNK = 20
MAX_ITEMS = 10_000


@transaction.atomic
def create(
    kind: str, names: Sequence[str], actor: str, *, delete_secrets: bool = False
) -> BulkAction:
    """Store a bulk action over `names` (duplicates dropped, order kept); nothing is done yet."""
    if kind not in BulkKind.values:
        raise ValueError(f"unknown bulk action {kind!r}")
    unique = list(dict.fromkeys(n for n in names if n))
    if not unique:
        raise ValueError("select at least one certificate")
    if len(unique) > MAX_ITEMS:
        raise ValueError(f"at most {MAX_ITEMS} certificates per bulk action")
    action = BulkAction.objects.create(
        kind=kind, actor=actor, delete_secrets=delete_secrets, total=len(unique)
    )
    BulkItem.objects.bulk_create(
        [BulkItem(action=action, position=i, certificate_name=n) for i, n in enumerate(unique)],
        batch_size=1000,
    )
    return action


def may_watch(user: Any, action_hex: str) -> bool:
    """Whether `user` may follow the action's progress: who started it, or an admin."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    try:
        action_id = uuid.UUID(action_hex)
    except ValueError:
        return False
    actor = BulkAction.objects.filter(pk=action_id).values_list("actor", flat=True).first()
    return actor is not None and (actor == user.get_username() or has_role(user, ADMIN))


def progress_message(action: BulkAction) -> dict[str, Any]:
    return {
        "type": "bulk.progress",
        "id": action.id.hex,
        "kind": action.kind,
        "done": action.done,
        "total": action.total,
        "failed": action.failed,
        "finished": action.finished_at is not None,
    }


def _act(action: BulkAction, names: list[str]) -> dict[str, str]:
    if action.kind == BulkKind.RENEW:
        return actions.force_renew_many(names, action.actor)
    return actions.delete_certificates(names, action.actor, delete_secrets=action.delete_secrets)


def _act_isolated(action: BulkAction, names: list[str]) -> dict[str, str]:
    """The chunk at once; if the database refuses it, item by item (each in a savepoint), so
    one bad certificate is reported as its own error rather than stopping the action."""
    try:
        with transaction.atomic():
            return _act(action, names)
    except DatabaseError:
        results = {}
        for name in names:
            try:
                with transaction.atomic():
                    results.update(_act(action, [name]))
            except DatabaseError as exc:
                results[name] = f"database error: {str(exc).splitlines()[0][:300]}"
        return results


def run_chunk(action_id: uuid.UUID | str) -> BulkAction:
    """Carry out the next CHUNK pending items of the action (one transaction); returns the
    action with its counters. A finished action is returned unchanged."""
    with transaction.atomic():
        # The row lock keeps two callers (two tabs) from doing the same items twice.
        action = BulkAction.objects.select_for_update().get(pk=action_id)
        if action.finished_at is not None:
            return action
        items = list(
            BulkItem.objects.filter(action=action, state=ItemState.PENDING).order_by("position")[
                :CHUNK
            ]
        )
        now = timezone.now()
        results = _act_isolated(action, [i.certificate_name for i in items]) if items else {}
        for item in items:
            error = results.get(item.certificate_name, "")
            item.state = ItemState.ERROR if error else ItemState.OK
            item.message = error[:1000]
            item.finished_at = now
        if items:
            BulkItem.objects.bulk_update(items, ["state", "message", "finished_at"])
        action.done += len(items)
        action.failed += sum(1 for i in items if i.state == ItemState.ERROR)
        if not items or action.done >= action.total:
            # Items only leave "pending" here, under the row lock: the counter is exact.
            action.finished_at = now
        action.save(update_fields=["done", "failed", "finished_at"])
        publish.send(
            publish.bulk_topic(action.id), progress_message(action), key=("bulk", action.id)
        )
    return action
