"""Is the current revision deployed? One word for a Certificate from its endpoints' last
probes, for its page and the API status:

- "Deployed": every endpoint serves the current revision;
- "Stale": an endpoint still serves an older revision STALE_AFTER after the current one was
  issued (or after the endpoint was added, when that is later);
- "Deploying": an older revision is served, within STALE_AFTER;
- "Mismatch": an endpoint serves a certificate this Certificate never had;
- "Unreachable": an endpoint could not be read;
- "Unchecked": an endpoint has not been probed yet;
- "" (no word): the certificate has no endpoints.

The worst wins, in the order Stale, Mismatch, Unreachable, Deploying, Unchecked.

The same rules are also written as database filters (`endpoint_q`, `certificate_q`) for the
list filter, the dashboard card, the metrics and the notification rules: each counts or
filters every certificate in one query, where `state_of` would need every row in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db.models import Count, Exists, OuterRef, Q

from issuance.models import Certificate, Endpoint

STALE_AFTER = timedelta(hours=1)
_ORDER = ("Stale", "Mismatch", "Unreachable", "Deploying", "Unchecked")
# Every state word of a certificate, worst first, and "" for no endpoints.
STATES = (*_ORDER, "Deployed", "")
# The list filter's and the API's `deployed` values: the state words lower-cased, and
# "none" for a certificate with no endpoints.
FILTER_VALUES = tuple(s.lower() or "none" for s in STATES)


class Deployment(TypedDict):
    state: str
    endpoints: int
    current: int  # endpoints serving the current revision
    stale: list[str]  # addresses serving an older revision past STALE_AFTER


def state_of(endpoint: Endpoint, now: datetime) -> str:
    if not endpoint.match:
        return "Unchecked"
    if endpoint.match == "current":
        return "Deployed"
    if endpoint.match == "foreign":
        return "Mismatch"
    if endpoint.match == "error":
        return "Unreachable"
    since = max(filter(None, (endpoint.revision_issued_at, endpoint.created_at)))
    return "Stale" if now - since >= STALE_AFTER else "Deploying"


def deployment(endpoints: Iterable[Endpoint], now: datetime) -> Deployment | None:
    rows = list(endpoints)
    if not rows:
        return None
    states = [state_of(e, now) for e in rows]
    worst = next((s for s in _ORDER if s in states), "Deployed")
    return {
        "state": worst,
        "endpoints": len(rows),
        "current": states.count("Deployed"),
        "stale": [e.address for e, s in zip(rows, states, strict=True) if s == "Stale"],
    }


def _old_enough(now: datetime) -> Q:
    # state_of's max(revision_issued_at, created_at) <= now - STALE_AFTER, as a filter.
    before = now - STALE_AFTER
    return Q(created_at__lte=before) & (
        Q(revision_issued_at__isnull=True) | Q(revision_issued_at__lte=before)
    )


def endpoint_q(state: str, now: datetime) -> Q:
    """The endpoints whose own state (`state_of`) is `state`, as a filter on Endpoint."""
    if state == "Stale":
        return Q(match="previous") & _old_enough(now)
    if state == "Deploying":
        return Q(match="previous") & ~_old_enough(now)
    simple = {"Unchecked": "", "Deployed": "current", "Mismatch": "foreign", "Unreachable": "error"}
    if state not in simple:
        raise ValueError(f"not an endpoint state: {state!r}")
    return Q(match=simple[state])


def _has(q: Q) -> Exists:
    return Exists(Endpoint.objects.filter(q, certificate=OuterRef("pk")))


def certificate_q(state: str, now: datetime) -> Q:
    """The certificates whose one word (`deployment(...)["state"]`) is `state` ("" for no
    endpoints), as a filter on Certificate: one EXISTS per state worse than or equal to
    it, each on the endpoints' certificate index."""
    if state == "":
        return ~Q(_has(Q()))
    if state == "Deployed":
        return Q(_has(Q())) & ~Q(_has(~Q(match="current")))
    if state not in _ORDER:
        raise ValueError(f"not a deployment state: {state!r}")
    worse = _ORDER[: _ORDER.index(state)]
    q = Q(_has(endpoint_q(state, now)))
    for other in worse:
        q &= ~Q(_has(endpoint_q(other, now)))
    return q


def state_of_filter_value(value: str) -> str:
    """The state word of a `deployed` filter value ("stale" → "Stale", "none" → "")."""
    return STATES[FILTER_VALUES.index(value)]


def certificate_count_aggregates(now: datetime) -> dict[str, Count]:
    """The filtered counts behind `certificate_counts`, for a caller that reads more of the
    certificates in the same aggregate query (the metrics): key `deployment:<state>`."""
    return {f"deployment:{s}": Count("pk", filter=certificate_q(s, now)) for s in STATES}


def counts_of(totals: dict[str, Any]) -> dict[str, int]:
    """The state → count of an aggregate that took `certificate_count_aggregates`."""
    return {s: int(totals[f"deployment:{s}"] or 0) for s in STATES}


def certificate_counts(now: datetime) -> dict[str, int]:
    """How many certificates have each state word ("" for no endpoints): one query."""
    return counts_of(Certificate.objects.order_by().aggregate(**certificate_count_aggregates(now)))


def endpoint_counts(now: datetime) -> dict[str, int]:
    """How many endpoints have each state (`state_of`): one query."""
    words = (*_ORDER, "Deployed")
    totals = Endpoint.objects.order_by().aggregate(
        **{f"n{i}": Count("pk", filter=endpoint_q(s, now)) for i, s in enumerate(words)}
    )
    return {s: int(totals[f"n{i}"] or 0) for i, s in enumerate(words)}
