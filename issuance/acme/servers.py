"""What this process knows of each CA's AcmeServer row (pause and reachability).

Every ACME request checks the row first, so each process keeps what it read for a second:
the common case (a healthy CA) costs no query. Whatever this process itself records is
remembered at once; `fresh=True` reads the row again (a decision that holds a request back
is never taken on a stale view).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from issuance.models import AcmeServer

# How long a process trusts its cached view of a CA before reading the row again.
CACHE_SECONDS = 1.0

FIELDS = (
    "paused_until",
    "pause_reason",
    "unreachable_since",
    "unreachable_error",
    "failed_requests",
    "probes",
    "probe_at",
)


@dataclass(frozen=True)
class ServerState:
    paused_until: datetime | None = None
    pause_reason: str = ""
    unreachable_since: datetime | None = None
    unreachable_error: str = ""
    failed_requests: int = 0
    probes: int = 0
    probe_at: datetime | None = None

    @property
    def unreachable(self) -> bool:
        return self.unreachable_since is not None


HEALTHY = ServerState()

_lock = threading.Lock()
# directory URL -> (monotonic time read, state)
_cache: dict[str, tuple[float, ServerState]] = {}


def read(directory_url: str, *, fresh: bool = False) -> ServerState:
    if not fresh:
        with _lock:
            cached = _cache.get(directory_url)
        if cached and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
    row = AcmeServer.objects.filter(directory_url=directory_url).values_list(*FIELDS).first()
    state = ServerState(*row) if row else HEALTHY
    remember(directory_url, state)
    return state


def cached(directory_url: str) -> ServerState | None:
    """The state this process last saw (any age), without a query."""
    with _lock:
        entry = _cache.get(directory_url)
    return entry[1] if entry else None


def remember(directory_url: str, state: ServerState) -> None:
    with _lock:
        _cache[directory_url] = (time.monotonic(), state)


def forget(directory_url: str | None = None) -> None:
    with _lock:
        if directory_url is None:
            _cache.clear()
        else:
            _cache.pop(directory_url, None)
