"""Turning findings into Notification rows (dedup), and delivering them: rate limit, daily
digest, retries with backoff.

Rate limit: a channel sends at most `rate_limit_per_hour` messages in any hour. The excess
is deferred, not dropped: it stays pending until the hour has room (its next attempt is set
to when the oldest message of the hour leaves the window). On a digest channel nothing is
sent one by one: messages are held and summarised once a day at `digest_hour` (UTC).

Retries: a failed send is tried again after 1 min, 5 min, 30 min and 2 h; after that it is
marked failed with its last error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from issuance.models import (
    DeliveryState,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import detect, send
from issuance.observability import publish

log = logging.getLogger("issuance.notifications")

RETRY_DELAYS = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
)
RATE_WINDOW = timedelta(hours=1)
# Deliveries per pass (each bounded by send.SEND_TIMEOUT).
BATCH = 50
DIGEST_MAX_LINES = 100
# A row being sent is not due again before this (longer than send.SEND_TIMEOUT).
CLAIM_FOR = timedelta(minutes=5)


def record(rules: Iterable[NotificationRule], now: datetime) -> int:
    """Store one Notification per (channel, condition, subject, instance) found; returns how
    many are new. Ones already stored are left alone (the unique key)."""
    created = 0
    for rule in rules:
        channel = rule.channel
        held = channel.digest_hour is not None
        rows = [
            Notification(
                channel=channel,
                rule=rule,
                condition=f.condition,
                subject=f.subject[:300],
                instance=f.instance[:200],
                title=f.title[:250],
                body=f.body,
                state=DeliveryState.DIGEST if held else DeliveryState.PENDING,
                next_attempt_at=now,
                created_at=now,
            )
            for f in detect.findings(rule, now)
        ]
        if not rows:
            continue
        known = set(
            Notification.objects.filter(
                channel=channel, condition=rule.condition, instance__in=[r.instance for r in rows]
            ).values_list("subject", "instance")
        )
        new = [r for r in rows if (r.subject, r.instance) not in known]
        if new:
            # ignore_conflicts: another worker may have stored the same finding meanwhile.
            Notification.objects.bulk_create(new, ignore_conflicts=True)
            created += len(new)
    return created


def detect_pass(now: datetime | None = None) -> int:
    now = now or timezone.now()
    rules = NotificationRule.objects.filter(enabled=True, channel__enabled=True).select_related(
        "channel"
    )
    return record(rules, now)


def queue_test(channel: NotificationChannel, actor: str, now: datetime | None = None) -> None:
    now = now or timezone.now()
    Notification.objects.create(
        channel=channel,
        condition=NotificationCondition.TEST,
        subject=f"Channel/{channel.name}",
        instance=f"{now.isoformat()}-{actor}"[:200],
        title="Issuance Console: test message",
        body=f"A test message for channel {channel.name}, sent at {actor}'s request.",
        next_attempt_at=now,
        created_at=now,
    )


def _sent_in_window(channel: NotificationChannel, now: datetime) -> tuple[int, datetime | None]:
    sent = Notification.objects.filter(
        channel=channel, state=DeliveryState.SENT, sent_at__gt=now - RATE_WINDOW
    )
    stats = sent.aggregate(first=Min("sent_at"))
    return sent.count(), stats["first"]


def _attempt(row: Notification, now: datetime) -> bool:
    channel = row.channel
    message = send.Message(row.title, row.body, row.condition, row.subject, row.pk)
    try:
        send.send(channel.url, channel.secret, message)
    except send.SendError as exc:
        row.attempted_at = now
        row.attempts += 1
        row.last_error = str(exc)[:1000]
        if row.attempts > len(RETRY_DELAYS):
            row.state = DeliveryState.FAILED
        else:
            row.state = DeliveryState.RETRYING
            row.next_attempt_at = now + RETRY_DELAYS[row.attempts - 1]
        log.warning(
            "notification %s to channel %s failed (attempt %s): %s",
            row.pk,
            channel.name,
            row.attempts,
            row.last_error,
        )
        row.save(
            update_fields=["attempts", "last_error", "state", "next_attempt_at", "attempted_at"]
        )
        publish.bulk_updated("Notification")  # the dashboard's delivery failures card
        return False
    recovered = bool(row.last_error)
    row.attempted_at = now
    row.attempts += 1
    row.state = DeliveryState.SENT
    row.sent_at = now
    row.last_error = ""
    row.save(update_fields=["attempts", "state", "sent_at", "last_error", "attempted_at"])
    if recovered:
        publish.bulk_updated("Notification")
    return True


def deliver_due(now: datetime | None = None) -> int:
    """Send what is due (at most BATCH); returns how many were attempted."""
    now = now or timezone.now()
    _make_digests(now)
    due = list(
        Notification.objects.filter(
            Q(state=DeliveryState.PENDING) | Q(state=DeliveryState.RETRYING),
            next_attempt_at__lte=now,
            channel__enabled=True,
        )
        .select_related("channel")
        .order_by("next_attempt_at", "pk")[:BATCH]
    )
    attempted = 0
    budget: dict[int, int] = {}
    for row in due:
        channel = row.channel
        if channel.pk not in budget:
            count, _ = _sent_in_window(channel, now)
            budget[channel.pk] = channel.rate_limit_per_hour - count
        if budget[channel.pk] <= 0:
            # Over the limit: deferred until the oldest send of the hour leaves the window.
            _, first_sent = _sent_in_window(channel, now)
            row.next_attempt_at = (first_sent or now) + RATE_WINDOW
            row.save(update_fields=["next_attempt_at"])
            continue
        if not _claim(row, now):
            continue  # another worker process took it
        attempted += 1
        if _attempt(row, now):
            budget[channel.pk] -= 1
    return attempted


def _claim(row: Notification, now: datetime) -> bool:
    """Take the row for this send (compare-and-set on its due time), so that two worker
    processes never send it both; if this process dies mid-send, the row is due again after
    CLAIM_FOR (at least once: webhook receivers get the notification's id to drop repeats)."""
    taken = Notification.objects.filter(
        pk=row.pk, state=row.state, next_attempt_at=row.next_attempt_at
    ).update(next_attempt_at=now + CLAIM_FOR)
    return taken == 1


def _make_digests(now: datetime) -> None:
    """Once a day at the channel's hour (UTC): one summary of what was held."""
    channels = NotificationChannel.objects.filter(enabled=True, digest_hour__isnull=False)
    for channel in channels:
        assert channel.digest_hour is not None
        if now.astimezone(UTC).hour < channel.digest_hour:
            continue
        today = now.astimezone(UTC).date()
        if (
            channel.last_digest_at is not None
            and channel.last_digest_at.astimezone(UTC).date() >= today
        ):
            continue
        with transaction.atomic():
            # Locked and read again: another worker process may have made today's digest.
            locked = NotificationChannel.objects.select_for_update().get(pk=channel.pk)
            last = locked.last_digest_at
            if last is not None and last.astimezone(UTC).date() >= today:
                continue
            held = list(
                Notification.objects.select_for_update()
                .filter(channel=channel, state=DeliveryState.DIGEST)
                .order_by("created_at", "pk")
            )
            locked.last_digest_at = now
            locked.save(update_fields=["last_digest_at"])
            if not held:
                continue
            lines = [f"- {row.title}: {row.body}" for row in held[:DIGEST_MAX_LINES]]
            if len(held) > DIGEST_MAX_LINES:
                lines.append(f"… and {len(held) - DIGEST_MAX_LINES} more (see the console)")
            Notification.objects.create(
                channel=channel,
                condition=NotificationCondition.DIGEST,
                subject=f"Channel/{channel.name}",
                instance=today.isoformat(),
                title=f"Issuance Console: {len(held)} notification(s) on {today.isoformat()}",
                body="\n".join(lines),
                next_attempt_at=now,
                created_at=now,
            )
            Notification.objects.filter(pk__in=[row.pk for row in held]).update(
                state=DeliveryState.DIGESTED, sent_at=now
            )
