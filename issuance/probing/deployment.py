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
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TypedDict

from issuance.models import Endpoint

STALE_AFTER = timedelta(hours=1)
_ORDER = ("Stale", "Mismatch", "Unreachable", "Deploying", "Unchecked")


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
