"""The worker's probe step: claim due endpoints and probe them on a pool of PROBE_CONCURRENCY
threads of its own, so probes never take a reconcile thread from an issuance and the loop
never waits on a server (each probe is bounded by the 5 s PROBE_TIMEOUT per operation).

A probe reads its rows, then talks to the server with no transaction open (autocommit: no
lock is held while it waits), then stores the result in one UPDATE. Claims are
compare-and-set on `claimed_until`, so several workers never probe one endpoint at once,
and one that dies lets its claims go after CLAIM_FOR.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from issuance.models import Endpoint, Event
from issuance.observability import events
from issuance.probing import schedule
from issuance.probing.assess import Known, assess, failed
from issuance.probing.handshake import PROBE_TIMEOUT, ProbeFailure, fetch
from issuance.probing.known import known_of
from issuance.shapes import EndpointProbe
from issuance.worker.wakeup import local_wakeup

log = logging.getLogger("issuance.probing")

# A claim outlives the longest probe (connect, STARTTLS lines, handshake: each 5 s).
CLAIM_FOR = timedelta(seconds=120)

_lock = threading.Lock()
_inflight: set[int] = set()
_pool: list[ThreadPoolExecutor] = []


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(settings.PROBE_CONCURRENCY, thread_name_prefix="probe"))
        return _pool[0]


def in_flight() -> int:
    with _lock:
        return len(_inflight)


def step() -> bool:
    """Start probes of due endpoints on free probe threads; never waits for one. Did work?"""
    with _lock:
        free = settings.PROBE_CONCURRENCY - len(_inflight)
        busy = set(_inflight)
    if free <= 0:
        return False
    now = timezone.now()
    claimed = claim(free, now, exclude=busy)
    for pk, token in claimed:
        with _lock:
            _inflight.add(pk)
        _executor().submit(_probe_in_thread, pk, token)
    return bool(claimed)


def _claimable(now: datetime) -> Q:
    return Q(next_probe_at__lte=now) & (Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))


def claim(limit: int, now: datetime, exclude: set[int] | None = None) -> list[tuple[int, datetime]]:
    """Claim up to `limit` due endpoints, the longest-waiting first: (pk, claim token)."""
    candidates = list(
        Endpoint.objects.filter(_claimable(now))
        .exclude(pk__in=exclude or set())
        .order_by("next_probe_at")
        .values_list("pk", flat=True)[:limit]
    )
    token = now + CLAIM_FOR
    claimed = []
    for pk in candidates:
        if Endpoint.objects.filter(_claimable(now), pk=pk).update(claimed_until=token):
            claimed.append((pk, token))
    return claimed


def _probe_in_thread(pk: int, token: datetime) -> None:
    try:
        probe_endpoint(pk, token)
    except Exception:
        log.exception("probe of endpoint %s failed", pk)
    finally:
        with _lock:
            _inflight.discard(pk)
        close_old_connections()
        # A thread is free: the loop claims the next due endpoint now, even if it was idle
        # (it would otherwise sleep up to 30 s, and a pass over many endpoints would crawl).
        schedule.wake.set()
        local_wakeup.set()


def probe_endpoint(pk: int, token: datetime | None = None) -> EndpointProbe | None:
    """Probe one endpoint now and store what it served (None: it was deleted meanwhile)."""
    endpoint = Endpoint.objects.select_related("certificate__issuer").filter(pk=pk).first()
    if endpoint is None:
        return None
    known = known_of(endpoint.certificate)
    record = probe(endpoint, known)
    store(endpoint, record, token)
    return record


def probe(endpoint: Endpoint, known: Known, timeout: float = PROBE_TIMEOUT) -> EndpointProbe:
    """Network and assessment only: no database access."""
    started = time.monotonic()
    try:
        served = fetch(
            endpoint.host,
            endpoint.port,
            endpoint.name_checked,
            endpoint.protocol,  # type: ignore[arg-type]  # the model's choices are the Protocols
            timeout,
        )
    except ProbeFailure as exc:
        return failed(exc, timezone.now(), _ms(started))
    return assess(served, known, endpoint.name_checked, timezone.now(), _ms(started))


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def store(endpoint: Endpoint, record: EndpointProbe, token: datetime | None) -> None:
    """One UPDATE with the result and the next probe; a Check now made while this probe ran
    keeps its earlier due time (the claim token no longer matches). A change of what is
    served goes into the certificate's timeline."""
    now = timezone.now()
    fingerprint = record["fingerprintSha256"]
    changed = (record["match"], fingerprint) != (endpoint.match, endpoint.served_fingerprint)
    fields = {
        "probed_at": now,
        "last_probe": record,
        "match": record["match"],
        "served_revision": record["revision"],
        "served_fingerprint": fingerprint,
        "served_since": now if changed else endpoint.served_since,
    }
    rows = Endpoint.objects.filter(pk=endpoint.pk)
    scheduled = rows.filter(claimed_until=token) if token is not None else rows
    next_at = schedule.next_probe(now, record["match"])
    stored = scheduled.update(**fields, next_probe_at=next_at, claimed_until=None)
    if not stored and not rows.update(**fields):
        return  # deleted meanwhile
    if changed:
        _record_change(endpoint, record)


def describe(record: EndpointProbe) -> str:
    """What the endpoint serves, in words: "revision 4", "revision 3 (1 behind)", …"""
    match = record["match"]
    if match == "error":
        return f"cannot be read ({record['errorKind']}): {record['error']}"
    if match == "current":
        return f"revision {record['revision']} (the current one)"
    if match == "previous":
        behind = record["behind"] or 0
        return f"revision {record['revision']} ({behind} behind the current one)"
    return (
        f"a certificate this Certificate never had (serial {record['serial']}, "
        f"issuer {record['issuer']})"
    )


def _record_change(endpoint: Endpoint, record: EndpointProbe) -> None:
    match = record["match"]
    verb = "now serves" if match != "error" else "now"
    events.record(
        "Certificate",
        endpoint.certificate.name,
        "EndpointChanged" if match != "error" else "EndpointUnreachable",
        f"{endpoint.address} {verb} {describe(record)}",
        type_=Event.NORMAL if match in {"current", "previous"} else Event.WARNING,
        certificate_name=endpoint.certificate.name,
    )
