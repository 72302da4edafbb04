"""Per-CA reachability: a CA that does not answer is asked by one probe, not by every item.

A request that fails at the network level (connection refused or reset, connect or read
timeout; not an answer, however bad) marks its CA (directory URL, the AcmeServer row)
unreachable: since when, the last error, how many requests failed. From then on a request
to that CA is sent only by the caller that wins the probe (a conditional UPDATE of
`probe_at`, so one probe at a time across all workers and hosts); everyone else gets an
AcmeUnreachableError without sending anything and waits. Probes come 2.5 s after the first
failure, then 5, 10 and 20 s after each failed one (the issuer controller sends them: a
GET of the directory over a new connection). The first answer from the CA, to a probe or
to any request, clears the record and wakes everything that waited at once.

Becoming unreachable and answering again are recorded once each (whoever's UPDATE
changed the row): a timeline entry per issuer of that CA, a wake-up of those issuers (their
Ready condition says CAUnreachable), and a live update for the dashboard and the pages of
their certificates still waiting.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from issuance.acme import servers
from issuance.acme.protocol.errors import AcmeUnreachableError
from issuance.models import (
    AcmeServer,
    Certificate,
    CertificateState,
    Challenge,
    Event,
    Issuer,
    IssuerKind,
    Order,
)
from issuance.observability import events, publish
from issuance.timing.backoff import exponential
from issuance.timing.durations import format_span
from issuance.worker import wakeup

log = logging.getLogger("issuance.acme.health")

# The first probe after the first failure, doubling after each failed probe up to the last:
# a CA that comes back is found within MAX_PROBE_INTERVAL (plus one probe's round trip).
FIRST_PROBE = timedelta(seconds=2.5)
MAX_PROBE_INTERVAL = timedelta(seconds=20)
# How long a probe holds the right to probe: longer than one request can take (connect 10 s
# + read 30 s); a probe that ends earlier sets the next probe time itself.
PROBE_LEASE = timedelta(seconds=45)
# Items that wait are woken when the CA answers; this is only the safety net.
WAIT_FALLBACK = timedelta(minutes=2)
# At most this many certificate pages are told of a change (the dashboard always is).
ANNOUNCE_CERTIFICATES = 500
# How long outages() trusts what it read (pages and API lists ask once per object).
OUTAGES_CACHE_SECONDS = 1.0


def probe_interval(failed_probes: int) -> timedelta:
    return exponential(failed_probes + 1, FIRST_PROBE, MAX_PROBE_INTERVAL)


# -- before and after each request -------------------------------------------------------


def gate(directory_url: str) -> bool:
    """Before a request: False when the CA is reachable (send it), True when this request is
    the probe (send it: its outcome is the probe's). Otherwise raise AcmeUnreachableError."""
    if not servers.read(directory_url).unreachable:
        return False
    now = timezone.now()
    state = servers.read(directory_url, fresh=True)
    if not state.unreachable:
        return False
    if state.probe_at is None or state.probe_at <= now:
        lease_end = now + PROBE_LEASE
        won = (
            AcmeServer.objects.filter(directory_url=directory_url, unreachable_since__isnull=False)
            .filter(Q(probe_at__isnull=True) | Q(probe_at__lte=now))
            .update(probe_at=lease_end)
        )
        if won:
            servers.remember(directory_url, dataclasses.replace(state, probe_at=lease_end))
            return True
        state = servers.read(directory_url, fresh=True)
        if not state.unreachable:
            return False
    raise waiting_error(directory_url, state, now)


def check_reachable(directory_url: str) -> None:
    """Raise AcmeUnreachableError while the CA is unreachable, without ever probing: for a
    caller that must not be the probe (a newOrder that times out may still create an order)."""
    if not servers.read(directory_url).unreachable:
        return
    state = servers.read(directory_url, fresh=True)
    if state.unreachable:
        raise waiting_error(directory_url, state, timezone.now())


def waiting_error(directory_url: str, state: servers.ServerState, now: datetime) -> Exception:
    since = state.unreachable_since or now
    retry_at = max(state.probe_at or now, now) + WAIT_FALLBACK
    return AcmeUnreachableError(
        directory_url, since, state.unreachable_error, state.probe_at, retry_at, now
    )


def record_failure(directory_url: str, error: str, *, probe: bool) -> Exception:
    """A request got no answer: count it (and mark the CA unreachable if it was not).
    Returns the AcmeUnreachableError for the caller to raise."""
    now = timezone.now()
    error = error[:2000]
    AcmeServer.objects.get_or_create(directory_url=directory_url, defaults={"updated_at": now})
    became = AcmeServer.objects.filter(
        directory_url=directory_url, unreachable_since__isnull=True
    ).update(
        unreachable_since=now,
        unreachable_error=error,
        failed_requests=1,
        probes=0,
        probe_at=now + probe_interval(0),
        updated_at=now,
    )
    if not became:
        fields: dict[str, object] = {
            "failed_requests": F("failed_requests") + 1,
            "unreachable_error": error,
            "updated_at": now,
        }
        if probe:
            failed_probes = servers.read(directory_url, fresh=True).probes + 1
            fields.update(probes=failed_probes, probe_at=now + probe_interval(failed_probes))
        AcmeServer.objects.filter(directory_url=directory_url).update(**fields)
    state = servers.read(directory_url, fresh=True)
    if became:
        log.warning("ACME server %s is unreachable: %s", directory_url, error)
        _became_unreachable(directory_url, error, now)
    return waiting_error(directory_url, state, now)


def record_answer(directory_url: str, *, probe: bool) -> None:
    """The CA answered (any HTTP response): if it was recorded unreachable, it is no longer."""
    known = servers.cached(directory_url)
    if not probe and (known is None or not known.unreachable):
        return
    row = (
        AcmeServer.objects.filter(directory_url=directory_url, unreachable_since__isnull=False)
        .values_list("unreachable_since", "failed_requests")
        .first()
    )
    since, failed = row if row else (None, 0)
    if since is None:
        servers.read(directory_url, fresh=True)
        return
    now = timezone.now()
    cleared = AcmeServer.objects.filter(
        directory_url=directory_url, unreachable_since=since
    ).update(
        unreachable_since=None,
        probes=0,
        probe_at=None,
        reachable_again_at=now,
        updated_at=now,
    )
    servers.read(directory_url, fresh=True)
    if cleared:
        log.warning(
            "ACME server %s answers again after %s (%d requests failed meanwhile)",
            directory_url,
            format_span((now - since).total_seconds()),
            failed,
        )
        _became_reachable(directory_url, since, failed, now)


# -- transitions ------------------------------------------------------------------------


def _issuers_of(directory_url: str) -> list[tuple[int, str]]:
    return list(
        Issuer.objects.filter(kind=IssuerKind.ACME, spec__acme__server=directory_url)
        .order_by("name")
        .values_list("pk", "name")
    )


def _became_unreachable(directory_url: str, error: str, now: datetime) -> None:
    issuers = _issuers_of(directory_url)
    for _pk, name in issuers:
        events.record(
            "Issuer",
            name,
            AcmeUnreachableError.REASON,
            f"The ACME server {directory_url} does not answer: {error}",
            type_=Event.WARNING,
        )
    # The issuers show it (Ready=False, CAUnreachable) and send the probes.
    _wake(Issuer.objects.filter(pk__in=[pk for pk, _ in issuers]), now)
    _announce(directory_url, [pk for pk, _ in issuers], reachable=False, when=now)


def _became_reachable(directory_url: str, since: datetime, failed: int, now: datetime) -> None:
    issuers = _issuers_of(directory_url)
    ids = [pk for pk, _ in issuers]
    for _pk, name in issuers:
        events.record(
            "Issuer",
            name,
            "CAReachable",
            f"The ACME server {directory_url} answers again after {format_span((now - since).total_seconds())} "
            f"({failed} request{'' if failed == 1 else 's'} failed meanwhile)",
        )
    _wake(Issuer.objects.filter(pk__in=ids), now)
    # Whatever waited on the CA: released after an error (error_count), or held right now by
    # a worker that may be deciding to wait (the wake-up keeps it due: wake_seq).
    waiting = Q(error_count__gt=0) | ~Q(lease_owner="")
    for model in (Order, Challenge):
        rows = model._default_manager.filter(issuer_id__in=ids, due_at__isnull=False)
        _wake(rows.filter(waiting), now)
    _announce(directory_url, ids, reachable=True, when=now)


def _wake(rows: QuerySet[Any], now: datetime) -> None:
    """Due now, and wake_seq bumped so a worker holding a row keeps it due (wakeup.wake)."""
    if rows.update(due_at=now, wake_seq=F("wake_seq") + 1):
        wakeup.woken()


def _announce(
    directory_url: str, issuer_ids: list[int], *, reachable: bool, when: datetime
) -> None:
    """Live updates: the dashboard and issuers page, and the pages of waiting certificates."""
    _forget_outages()
    publish.bulk_updated("AcmeServer")
    names = (
        Certificate.objects.filter(issuer_id__in=issuer_ids)
        .exclude(state=CertificateState.READY)
        .order_by()
        .values_list("name", flat=True)[:ANNOUNCE_CERTIFICATES]
    )
    message = {
        "type": "ca.reachability",
        "server": directory_url,
        "reachable": reachable,
        "at": when.isoformat(),
    }
    for name in names:
        publish.send(publish.certificate_topic(name), message, key=("ca", name))


# -- what pages and the API show ------------------------------------------------------------


@dataclass(frozen=True)
class Outage:
    directory_url: str
    since: datetime
    error: str
    failed_requests: int
    probe_at: datetime | None

    @property
    def reason(self) -> str:
        """`CAUnreachable: <error> since <time>`, as orders and certificates show it."""
        when = self.since.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{AcmeUnreachableError.REASON}: {self.error} since {when}"


_outages_lock = threading.Lock()
_outages: tuple[float, dict[str, Outage], dict[int, Outage]] | None = None


def _forget_outages() -> None:
    global _outages  # noqa: PLW0603 - one short-lived cache per process
    with _outages_lock:
        _outages = None


def _load_outages() -> tuple[dict[str, Outage], dict[int, Outage]]:
    global _outages  # noqa: PLW0603
    with _outages_lock:
        cached = _outages
    if cached and time.monotonic() - cached[0] < OUTAGES_CACHE_SECONDS:
        return cached[1], cached[2]
    rows = AcmeServer.objects.filter(unreachable_since__isnull=False).values_list(
        "directory_url", "unreachable_since", "unreachable_error", "failed_requests", "probe_at"
    )
    by_url = {
        url: Outage(url, since, error, failed, probe_at)
        for url, since, error, failed, probe_at in rows
        if since is not None
    }
    by_issuer: dict[int, Outage] = {}
    if by_url:
        for pk, spec in Issuer.objects.filter(kind=IssuerKind.ACME).values_list("pk", "spec"):
            server = (spec.get("acme") or {}).get("server") if isinstance(spec, dict) else None
            if server in by_url:
                by_issuer[pk] = by_url[server]
        # A server no issuer uses any more is not probed: its record is history, not news.
        used = {o.directory_url for o in by_issuer.values()}
        by_url = {url: o for url, o in by_url.items() if url in used}
    with _outages_lock:
        _outages = (time.monotonic(), by_url, by_issuer)
    return by_url, by_issuer


def outages() -> list[Outage]:
    """Every CA an issuer uses that is unreachable right now (read at most once a second
    per process)."""
    return sorted(_load_outages()[0].values(), key=lambda o: o.since)


def outage_of_server(directory_url: str) -> Outage | None:
    return _load_outages()[0].get(directory_url)


def outage_of_issuer(issuer_id: int | None) -> Outage | None:
    if issuer_id is None:
        return None
    return _load_outages()[1].get(issuer_id)


def forget() -> None:
    """Drop this process's cached views (tests)."""
    _forget_outages()
    servers.forget()
