"""Numbers for the dashboard's charts and /api/v1/stats/, each grouped in the database.

Three queries in all, whatever the number of certificates and events: renewals per day and
issuer (GROUP BY day, issuer), certificates per days-to-expiry bucket (one row of
conditional counts), issuance outcomes per day (GROUP BY day, reason over the timeline).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from issuance.models import Certificate, Event

RENEWAL_DAYS = 90
ISSUANCE_DAYS = 14
# Issuers drawn as their own series; the rest are summed as OTHER (a chart with 30 colours
# tells nothing apart).
MAX_SERIES = 6
OTHER = "other issuers"
# The certificate timeline's reasons for a finished issuance (issuance/controllers/issuing.py).
ISSUED_REASONS = ("Issued",)
FAILED_REASONS = ("Failed", "Denied")
# (key, label, lower bound in days, upper bound in days); None: open.
EXPIRY_BUCKETS: tuple[tuple[str, str, int | None, int | None], ...] = (
    ("expired", "expired", None, 0),
    ("lt7", "< 7 days", 0, 7),
    ("d7to30", "7–30 days", 7, 30),
    ("d30to60", "30–60 days", 30, 60),
    ("d60to90", "60–90 days", 60, 90),
    ("gt90", "> 90 days", 90, None),
)


@dataclass(frozen=True)
class RenewalDay:
    day: date
    counts: tuple[int, ...]  # per series, in RenewalStats.series order

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class RenewalStats:
    start: date
    series: tuple[str, ...]  # issuer names, busiest first; OTHER last when present
    days: tuple[RenewalDay, ...]
    overdue: int  # renewal time before today


@dataclass(frozen=True)
class ExpiryBucket:
    key: str
    label: str
    count: int


@dataclass(frozen=True)
class IssuanceDay:
    day: date
    issued: int
    failed: int


@dataclass(frozen=True)
class Stats:
    generated_at: datetime
    renewals: RenewalStats
    expiry: tuple[ExpiryBucket, ...]
    without_certificate: int
    issuance: tuple[IssuanceDay, ...]


def _today_start(now: datetime) -> datetime:
    local = timezone.localtime(now)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def renewal_stats(now: datetime) -> RenewalStats:
    start = _today_start(now)
    end = start + timedelta(days=RENEWAL_DAYS)
    rows = (
        Certificate.objects.filter(renewal_time__lt=end, renewal_time__isnull=False)
        .annotate(day=TruncDate("renewal_time"))
        .values_list("day", "issuer__name")
        .annotate(n=Count("id"))
        .order_by()
    )
    per_issuer: dict[str, int] = {}
    cells: dict[tuple[date, str], int] = {}
    overdue = 0
    first = start.date()
    for day, issuer, n in rows:
        if day < first:
            overdue += n
            continue
        per_issuer[issuer] = per_issuer.get(issuer, 0) + n
        cells[(day, issuer)] = cells.get((day, issuer), 0) + n
    ranked = sorted(per_issuer, key=lambda name: (-per_issuer[name], name))
    named = ranked if len(ranked) <= MAX_SERIES else ranked[: MAX_SERIES - 1]
    series = tuple(named) + ((OTHER,) if len(ranked) > len(named) else ())
    index = {name: i for i, name in enumerate(named)}
    days = []
    for offset in range(RENEWAL_DAYS):
        day = first + timedelta(days=offset)
        counts = [0] * len(series)
        for issuer in ranked:
            n = cells.get((day, issuer), 0)
            if n:
                counts[index.get(issuer, len(series) - 1)] += n
        days.append(RenewalDay(day, tuple(counts)))
    return RenewalStats(first, series, tuple(days), overdue)


def expiry_stats(now: datetime) -> tuple[tuple[ExpiryBucket, ...], int]:
    aggregates: dict[str, Count] = {"none": Count("id", filter=Q(not_after__isnull=True))}
    for key, _, low, high in EXPIRY_BUCKETS:
        cond = Q(not_after__isnull=False)
        if low is not None:
            cond &= Q(not_after__gte=now + timedelta(days=low))
        if high is not None:
            cond &= Q(not_after__lt=now + timedelta(days=high))
        aggregates[key] = Count("id", filter=cond)
    found = Certificate.objects.order_by().aggregate(**aggregates)
    buckets = tuple(ExpiryBucket(key, label, found[key]) for key, label, _, _ in EXPIRY_BUCKETS)
    return buckets, found["none"]


def issuance_stats(now: datetime) -> tuple[IssuanceDay, ...]:
    first = _today_start(now) - timedelta(days=ISSUANCE_DAYS - 1)
    rows = (
        Event.objects.filter(
            kind="Certificate",
            reason__in=ISSUED_REASONS + FAILED_REASONS,
            created_at__gte=first,
        )
        .annotate(day=TruncDate("created_at"))
        .values_list("day", "reason")
        .annotate(n=Count("id"))
        .order_by()
    )
    issued: dict[date, int] = {}
    failed: dict[date, int] = {}
    for day, reason, n in rows:
        target = issued if reason in ISSUED_REASONS else failed
        target[day] = target.get(day, 0) + n
    start = first.date()
    return tuple(
        IssuanceDay(d, issued.get(d, 0), failed.get(d, 0))
        for d in (start + timedelta(days=i) for i in range(ISSUANCE_DAYS))
    )


def stats(now: datetime | None = None) -> Stats:
    moment = now or timezone.now()
    expiry, without = expiry_stats(moment)
    return Stats(moment, renewal_stats(moment), expiry, without, issuance_stats(moment))
