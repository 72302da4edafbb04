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

from issuance import events, publish, wakeup
from issuance.models import Challenge, ChallengeState, Event, certificate_name_of

log = logging.getLogger("issuance.scheduler")

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
    if connection.vendor == "postgresql":
        # One statement, precompiled text: this runs in every pass (up to 10 a second).
        with connection.cursor() as cursor:
            cursor.execute(_PROCESSING_SQL.format(challenge=_table()), [cutoff, cutoff])
            rows = cursor.fetchall()
        return {r[0]: r[1] for r in rows}, [pk for r in rows for pk in r[2] or []]
    per_issuer = dict(
        Challenge.objects.filter(processing=True)
        .order_by()
        .values_list("issuer_id")
        .annotate(n=Count("id"))
        .values_list("issuer_id", "n")
    )
    stuck = (
        Challenge.objects.filter(processing=True)
        .filter(Q(scheduled_at__lt=cutoff) | Q(scheduled_at__isnull=True, created_at__lt=cutoff))
        .values_list("pk", flat=True)
    )
    return per_issuer, list(stuck)


_PROCESSING_SQL = """
SELECT issuer_id, COUNT(*),
       array_agg(id) FILTER (WHERE scheduled_at < %s OR (scheduled_at IS NULL AND created_at < %s))
FROM {challenge} WHERE processing GROUP BY issuer_id
"""


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


def _issuers_with_queued_work() -> list[int]:
    from issuance.models import Issuer

    queued = Challenge.objects.filter(issuer=OuterRef("pk"), finished=False, processing=False)
    return list(Issuer.objects.filter(Exists(queued)).order_by().values_list("pk", flat=True))


def _candidates_portable(limit: int) -> dict[int, list[Candidate]]:
    """One ORM query per issuer with queued work (SQLite: one worker, small queues)."""
    queues: dict[int, list[Candidate]] = {}
    base = eligible_queryset()
    for issuer_id in _issuers_with_queued_work():
        rows = base.filter(issuer_id=issuer_id).values_list("id", "issuer_id", "created_at")
        queues[issuer_id] = [Candidate(*row) for row in rows[:limit]]
    return queues


# PostgreSQL: both statements are written so that only chal_queued_issuer can answer them.
# Planner estimates cannot be trusted here: issuer and "queued" are correlated (an issuer
# with a long history of finished challenges looks like it has a long queue), and with a
# wrong guess the planner walks the whole queue or an issuer's whole history.
#
# Issuers with queued work: a loose index scan (one index probe per issuer), in issuer order;
# ordering by the full index key leaves the foreign-key index (issuer_id only) no way in.
_ISSUERS_SQL = """
WITH RECURSIVE t(issuer_id) AS (
    (SELECT issuer_id FROM {challenge}
     WHERE NOT finished AND NOT processing ORDER BY issuer_id, created_at, id LIMIT 1)
    UNION ALL
    SELECT (SELECT c.issuer_id FROM {challenge} c
            WHERE NOT c.finished AND NOT c.processing AND c.issuer_id > t.issuer_id
            ORDER BY c.issuer_id, c.created_at, c.id LIMIT 1)
    FROM t WHERE t.issuer_id IS NOT NULL
)
SELECT issuer_id FROM t WHERE issuer_id IS NOT NULL
"""

# One issuer's oldest `limit` eligible challenges (the rules of eligible_queryset()); one
# branch per issuer, glued with UNION ALL. The issuer is a range, not an equality, so that
# ORDER BY issuer_id, created_at, id is satisfied by chal_queued_issuer alone (with an
# equality the planner may walk chal_queued_age filtering by issuer instead). The NOT EXISTS
# probes use chal_queued_key and chal_processing_key.
_BRANCH_SQL = """(
    SELECT q.id, q.issuer_id, q.created_at
    FROM {challenge} q
    WHERE q.issuer_id >= %s AND q.issuer_id <= %s AND NOT q.finished AND NOT q.processing
      AND NOT EXISTS (
        SELECT 1 FROM {challenge} o
        WHERE NOT o.finished AND NOT o.processing
          AND o.dns_name = q.dns_name AND o.type = q.type
          AND (o.created_at < q.created_at OR (o.created_at = q.created_at AND o.id < q.id)))
      AND NOT EXISTS (
        SELECT 1 FROM {challenge} p
        WHERE p.processing AND p.dns_name = q.dns_name AND p.type = q.type)
    ORDER BY q.issuer_id, q.created_at, q.id
    LIMIT %s
)"""


def _table() -> str:
    return connection.ops.quote_name(Challenge._meta.db_table)


def issuers_sql() -> str:
    return _ISSUERS_SQL.format(challenge=_table())


def candidates_sql(issuer_ids: Sequence[int], limit: int) -> tuple[str, list[int]]:
    branch = _BRANCH_SQL.format(challenge=_table())
    params: list[int] = []
    for issuer_id in issuer_ids:
        params += [issuer_id, issuer_id, limit]
    return "\nUNION ALL\n".join([branch] * len(issuer_ids)), params


def _candidates(limit: int) -> dict[int, list[Candidate]]:
    """Each issuer's eligible candidates, oldest first, at most `limit` each."""
    if connection.vendor != "postgresql":
        return _candidates_portable(limit)
    queues: dict[int, list[Candidate]] = {}
    with connection.cursor() as cursor:
        cursor.execute(issuers_sql())
        issuer_ids = [row[0] for row in cursor.fetchall()]
        if not issuer_ids:
            return {}
        sql, params = candidates_sql(issuer_ids, limit)
        cursor.execute(sql, params)
        for row in cursor.fetchall():
            candidate = Candidate(*row)
            queues.setdefault(candidate.issuer_id, []).append(candidate)
    for queue in queues.values():
        queue.sort(key=lambda c: (c.created_at, c.id))
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


_START_SQL = """
UPDATE {challenge} SET processing = true, scheduled_at = %s, due_at = %s, next_check_at = NULL,
    wake_seq = wake_seq + 1
WHERE id = ANY(%s) AND NOT processing AND NOT finished
"""


def _start(ids: list[int], now: datetime) -> int:
    """Mark these queued challenges processing and due now; returns how many were."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_START_SQL.format(challenge=_table()), [now, now, ids])
            return int(cursor.rowcount)
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
