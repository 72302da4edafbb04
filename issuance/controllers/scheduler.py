"""Challenge scheduler: which queued challenges start processing.

One pass:
1. fail challenges stuck in processing past CHALLENGE_PROCESSING_TIMEOUT (they free their slot);
2. count processing challenges; at MAX_CONCURRENT_CHALLENGES schedule none;
3. candidates are queued (not finished, not processing) challenges that are the oldest queued
   one for their (dnsName, type) and whose (dnsName, type) is not already processing;
4. schedule them oldest first up to the free slots, but while several issuers have candidates
   no issuer holds more than ceil(cap / issuers waiting) slots (unused share goes to others).

Everything is answered by the partial indexes on Challenge (chal_queued_age, chal_queued_key,
chal_queued_issuer, chal_processing_key): the per-issuer queries read at most `free` eligible
rows each, so a pass costs the same with 100 queued challenges or 100 000.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from issuance.models import Challenge, ChallengeState, Event, Issuer, certificate_name_of
from issuance.observability import events, publish
from issuance.worker import wakeup

log = logging.getLogger("issuance.controllers.scheduler")

# Set (after commit) when a challenge is queued or frees its slot: the worker's busy loop
# runs a pass at once instead of waiting for its periodic one.
queue_changed = threading.Event()


def mark_queue_changed() -> None:
    """Ask for a scheduling pass soon (call inside the transaction that changed the queue)."""
    transaction.on_commit(queue_changed.set)


# pg_try_advisory_xact_lock key: "chal" in ASCII, so it is recognisable in pg_locks.
ADVISORY_LOCK_KEY = 0x6368616C


@dataclass(frozen=True)
class Candidate:
    id: int
    issuer_id: int
    created_at: datetime


@dataclass(frozen=True)
class SchedulerState:
    """What the dashboard and the API show about the queue."""

    queued: int
    processing: int
    cap: int


def format_timeout(delta: timedelta) -> str:
    """`1h`, `30m`, `1h30m`, `45s`: short, for the reason an operator reads."""
    seconds = max(int(delta.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return "".join(parts) or "0s"


def eligible_queryset() -> QuerySet[Challenge]:
    """Queued challenges that are the oldest of their (dnsName, type) and whose key is idle."""
    older_same_key = Challenge.objects.filter(
        finished=False,
        processing=False,
        dns_name=OuterRef("dns_name"),
        type=OuterRef("type"),
    ).filter(
        Q(created_at__lt=OuterRef("created_at"))
        | Q(created_at=OuterRef("created_at"), id__lt=OuterRef("id"))
    )
    same_key_processing = Challenge.objects.filter(
        processing=True, dns_name=OuterRef("dns_name"), type=OuterRef("type")
    )
    return (
        Challenge.objects.filter(finished=False, processing=False)
        .filter(~Exists(older_same_key), ~Exists(same_key_processing))
        .order_by("created_at", "id")
    )


def allocate(
    queues: Mapping[int, Sequence[Candidate]],
    processing_by_issuer: Mapping[int, int],
    free: int,
    cap: int,
) -> list[Candidate]:
    """Pick up to `free` candidates, oldest first, with a per-issuer fair share.

    `queues` holds each waiting issuer's eligible candidates, oldest first. The share is
    ceil(cap / issuers with candidates). An issuer at its share is passed over while another
    issuer below its share still has candidates; when none has, the oldest candidate goes.
    """
    waiting = {issuer: list(q) for issuer, q in queues.items() if q}
    if not waiting or free <= 0:
        return []
    share = math.ceil(cap / len(waiting))
    held = {issuer: processing_by_issuer.get(issuer, 0) for issuer in waiting}
    pos = dict.fromkeys(waiting, 0)
    chosen: list[Candidate] = []
    while len(chosen) < free:
        heads = [
            (q[pos[i]].created_at, q[pos[i]].id, i) for i, q in waiting.items() if pos[i] < len(q)
        ]
        if not heads:
            break
        under_share = [h for h in heads if held[h[2]] < share]
        _, _, issuer = min(under_share or heads)
        chosen.append(waiting[issuer][pos[issuer]])
        pos[issuer] += 1
        held[issuer] += 1
    return chosen


def processing_now(now: datetime) -> tuple[dict[int, int], list[int]]:
    """Processing challenges per issuer, and those processing for longer than the timeout."""
    cutoff = now - settings.CHALLENGE_PROCESSING_TIMEOUT
    processing = Challenge.objects.filter(processing=True).order_by()
    per_issuer = dict(
        processing.values_list("issuer_id").annotate(n=Count("id")).values_list("issuer_id", "n")
    )
    stuck = processing.filter(
        Q(scheduled_at__lt=cutoff) | Q(scheduled_at__isnull=True, created_at__lt=cutoff)
    ).values_list("pk", flat=True)
    return per_issuer, list(stuck)


def fail_timed_out(now: datetime, stuck_ids: Sequence[int] | None = None) -> int:
    """Fail challenges processing for longer than the timeout so they stop holding a slot.

    The row becomes final (errored, finished, not processing) at once; the challenges
    controller then removes what it presented (it cleans up any finished, presented row).
    """
    timeout: timedelta = settings.CHALLENGE_PROCESSING_TIMEOUT
    if stuck_ids is None:
        stuck_ids = processing_now(now)[1]
    if not stuck_ids:
        return 0
    stuck = Challenge.objects.filter(pk__in=stuck_ids).select_related("order__request__certificate")
    reason = f"timed out after {format_timeout(timeout)} in processing"
    failed = 0
    for challenge in stuck:
        # Row lock: the challenges controller may be finishing it at this very moment.
        still = (
            Challenge.objects.select_for_update()
            .filter(pk=challenge.pk, processing=True)
            .values_list("pk", flat=True)
            .first()
        )
        if still is None:
            continue
        challenge.processing = False
        challenge.finished = True
        challenge.state = ChallengeState.ERRORED
        challenge.reason = reason
        challenge.next_check_at = None
        challenge.save(
            update_fields=[
                "processing",
                "finished",
                "state",
                "reason",
                "next_check_at",
                "updated_at",
            ]
        )
        failed += 1
        # Due now: the controller cleans up what it presented; the order sees the failure.
        wakeup.wake(challenge)
        wakeup.wake(challenge.order)
        events.record(
            "Challenge",
            challenge.name,
            "TimedOut",
            f"{challenge.type} challenge for {challenge.dns_name}: {reason}",
            type_=Event.WARNING,
            certificate_name=certificate_name_of(challenge),
        )
        log.warning("challenge %s %s", challenge.name, reason)
    return failed


def issuers_with_queued_work_query() -> QuerySet[Issuer]:
    queued = Challenge.objects.filter(issuer=OuterRef("pk"), finished=False, processing=False)
    return Issuer.objects.filter(Exists(queued)).order_by()


def candidates_query(issuer_id: int, limit: int) -> QuerySet[Challenge]:
    """One issuer's oldest `limit` eligible challenges."""
    return eligible_queryset().filter(issuer_id=issuer_id)[:limit]


def _candidates(limit: int) -> dict[int, list[Candidate]]:
    """Each issuer's eligible candidates, oldest first, at most `limit` each."""
    queues: dict[int, list[Candidate]] = {}
    for issuer_id in issuers_with_queued_work_query().values_list("pk", flat=True):
        rows = candidates_query(issuer_id, limit).values_list("id", "issuer_id", "created_at")
        queues[issuer_id] = [Candidate(*row) for row in rows]
    return queues


def _locked() -> bool:
    """Serialise passes across workers: PostgreSQL advisory lock; SQLite has one writer."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        row = cursor.fetchone()
    return bool(row and row[0])


def schedule_pass(now: datetime | None = None) -> bool:
    """Run one scheduling pass. Returns True when it changed anything."""
    now = now or timezone.now()
    cap: int = settings.MAX_CONCURRENT_CHALLENGES
    with transaction.atomic():
        if not _locked():
            # Another worker is in the middle of a pass; it will schedule what is free.
            return False
        per_issuer, stuck = processing_now(now)
        failed = fail_timed_out(now, stuck) if stuck else 0
        if failed:
            per_issuer = processing_now(now)[0]
        free = cap - sum(per_issuer.values())
        if free <= 0:
            return failed > 0
        queues = _candidates(free)
        chosen = allocate(queues, per_issuer, free, cap)
        if not chosen:
            return failed > 0
        scheduled = _start([c.id for c in chosen], now)
        if scheduled:
            transaction.on_commit(wakeup.notify_workers)
            # A bulk update sends no post_save: tell the live dashboard (queue depth) once.
            publish.bulk_updated("Challenge")
            log.info("scheduled %d challenge(s), %d slot(s) were free", scheduled, free)
        return scheduled > 0 or failed > 0


def _start(ids: list[int], now: datetime) -> int:
    """Mark these queued challenges processing and due now; returns how many were."""
    return Challenge.objects.filter(pk__in=ids, processing=False, finished=False).update(
        processing=True,
        scheduled_at=now,
        due_at=now,
        next_check_at=None,
        wake_seq=F("wake_seq") + 1,
    )


def scheduler_state() -> SchedulerState:
    return SchedulerState(
        queued=Challenge.objects.filter(finished=False, processing=False).count(),
        processing=Challenge.objects.filter(processing=True).count(),
        cap=settings.MAX_CONCURRENT_CHALLENGES,
    )
