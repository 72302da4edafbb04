"""When to renew: the renewal time of a certificate."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from issuance.timing import cron
from issuance.timing.cron import Cron
from issuance.timing.durations import DurationError, parse_duration

# At most this share of the renew-before window is taken off as anti-storm jitter.
JITTER_FRACTION = 0.02
JITTER_MAX = timedelta(hours=1)
POLICY_RENEW_BEFORE = "RenewBefore"
POLICY_DISABLED = "Disabled"


def renew_before(
    not_before: datetime,
    not_after: datetime,
    renew_before_spec: str | None = None,
    renew_before_percentage: int | None = None,
) -> timedelta:
    """`renewBefore` if set and below the lifetime; else the percentage; else a third."""
    lifetime = not_after - not_before
    if renew_before_spec:
        value = parse_duration(renew_before_spec)
        if timedelta(0) < value < lifetime:
            return value
    if renew_before_percentage is not None and 0 < renew_before_percentage < 100:
        return lifetime * renew_before_percentage / 100
    return lifetime / 3


def jitter(name: str, window: timedelta) -> timedelta:
    """Deterministic per-certificate jitter in [0, min(2 % of window, 1 h)); never negative."""
    span = min(window * JITTER_FRACTION, JITTER_MAX)
    if span <= timedelta(0):
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return timedelta(seconds=span.total_seconds() * (digest / 2**64))


def renewal_time(
    name: str,
    not_before: datetime,
    not_after: datetime,
    renew_before_spec: str | None = None,
    renew_before_percentage: int | None = None,
    ari_suggested: datetime | None = None,
) -> datetime:
    """notAfter − renewBefore − jitter; an ARI window from the CA wins over the formula."""
    if ari_suggested is not None:
        return ari_suggested
    before = renew_before(not_before, not_after, renew_before_spec, renew_before_percentage)
    return not_after - before - jitter(name, before)


# -- renewal windows (cert-manager's spec.renewal) --------------------------------------------


@dataclass(frozen=True)
class Window:
    """Renewals may start within `duration` after each time `cron` matches in `zone`."""

    cron: Cron
    zone: ZoneInfo
    duration: timedelta

    def first_open(self, moment: datetime) -> datetime | None:
        """`moment` if a window is open then, else the next opening (None: never opens)."""
        # A window is open at t when it opened at some m with t - duration < m <= t: the
        # first opening after t - duration is either at or before t (open) or the next one.
        opening = self.cron.next_after(moment - self.duration, self.zone)
        return None if opening is None else max(opening, moment)


def windows_of(renewal: Mapping[str, Any] | None) -> list[Window]:
    """The windows of a stored (validated) `spec.renewal`; unreadable entries are skipped."""
    out: list[Window] = []
    for item in (renewal or {}).get("windows") or []:
        try:
            out.append(
                Window(
                    cron.parse(str(item.get("cron") or "")),
                    ZoneInfo(str(item.get("timezone") or "UTC")),
                    parse_duration(str(item.get("windowDuration") or "")),
                )
            )
        except (cron.CronError, DurationError, ValueError, KeyError):
            continue
    return out


def renewal_disabled(renewal: Mapping[str, Any] | None) -> bool:
    return str((renewal or {}).get("policy") or "") == POLICY_DISABLED


def first_in_windows(moment: datetime, windows: list[Window]) -> datetime | None:
    """The first instant at or after `moment` inside any window (no windows: `moment`)."""
    if not windows:
        return moment
    found = [w for w in (window.first_open(moment) for window in windows) if w is not None]
    return min(found) if found else None
