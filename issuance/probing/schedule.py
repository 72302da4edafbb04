"""When an endpoint is probed: on a schedule (PROBE_INTERVAL, spread out), sooner while it
does not serve the current revision, at once after a new revision and on "Check now".

Imported by the certificates controller (a new revision makes its endpoints due) and by the
pages, the API and certctl (Check now): nothing here does network I/O.
"""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet

from issuance.models import Endpoint
from issuance.worker.wakeup import request_steps

# While an endpoint serves an older revision, something foreign or nothing at all, it is
# looked at this often (a server reloaded a few minutes after the issuance shows Deployed
# without waiting for the next scheduled probe).
RECHECK = timedelta(minutes=10)
# Scheduled probes are spread over the last fifth of the interval, so endpoints added
# together (or all made due by one issuance) drift apart instead of probing in one burst.
SPREAD = 0.2

# Set when endpoints were made due in this process: the worker's loop runs the step at once.
wake = threading.Event()


def next_probe(now: datetime, match: str) -> datetime:
    interval: timedelta = settings.PROBE_INTERVAL
    if match != "current":
        return now + min(RECHECK, interval)
    return now + interval * (1 - SPREAD * random.random())  # noqa: S311 - spreading, not secrets


def make_due(
    endpoints: QuerySet[Endpoint],
    now: datetime,
    *,
    other_processes: bool = True,
    new_revision: bool = False,
) -> int:
    """Probe these at the worker's next loop, even if a probe of them is under way. With
    other_processes, workers elsewhere are told after commit (Check now from a web process);
    the certificates controller runs in a worker, whose own loop is enough."""
    extra = {"revision_issued_at": now} if new_revision else {}
    count = endpoints.update(next_probe_at=now, claimed_until=None, **extra)
    if count:
        wake.set()
        if other_processes:
            request_steps()
    return count
