"""Finding the conditions worth a message, from the database, with bounded queries.

Each finding has an `instance`: what makes it new. A Notification row is keyed by (channel,
condition, subject, instance), so a certificate that keeps failing with the same attempt
count is reported once; attempt 4 (a new instance) is reported again, as is a new expiry
date after a renewal that did not help.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import CharField, Exists, F, OuterRef, Q, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Concat

from issuance.models import (
    AcmeServer,
    Approval,
    Certificate,
    CertificateRequest,
    Cluster,
    ClusterState,
    Endpoint,
    Event,
    KubeConnectorState,
    Notification,
    NotificationCondition,
    NotificationRule,
    canonical_condition,
)
from issuance.probing.deployment import STALE_AFTER, endpoint_q

# At most this many subjects per rule and pass (a flood is reported over several passes;
# the ones already reported are skipped by the unique key, so the pass moves on).
LIMIT = 200
# Renewal is overdue once the renewal time is this far in the past.
OVERDUE_GRACE = timedelta(hours=1)
# ARI moves looked for in the timeline this far back.
ARI_LOOKBACK = timedelta(days=2)
# Cluster unreachable: an outage is reported once it has lasted this long (a rule's
# threshold, in minutes, overrides it). The sync marks a cluster Unreachable about a second
# after its API server stops answering, the CSR connector at its first failed call; an API
# server restart (an upgrade, a certificate rotation, a control-plane node failing over)
# is back within tens of seconds and should page no one, while an outage should be known
# within a minute or two: with detection every 30 s, the message leaves 60-90 s after the
# start.
UNREACHABLE_AFTER = timedelta(minutes=1)
# "Resolved" is sent for an outage that ended this recently (found by the next detection,
# within 30 s): a rule switched to notify_resolved later does not report old outages.
RESOLVED_WITHIN = timedelta(hours=1)


@dataclass(frozen=True)
class Finding:
    condition: str
    subject: str  # "Certificate/web"
    name: str  # the resource name (matched by the rule's name pattern)
    issuer: str  # matched by the rule's issuer pattern ("" when not applicable)
    instance: str
    title: str
    body: str


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "?"


def _failure_reason(cert: Certificate) -> str:
    condition = cert.get_condition("Issuing")
    if condition is not None and condition.get("status") == "False":
        return f"{condition.get('reason', '')}: {condition.get('message', '')}"
    return cert.last_error or "unknown"


def _certificates(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    base = Certificate.objects.select_related("issuer").order_by("pk")
    c = rule.condition
    if c in (NotificationCondition.ISSUANCE_FAILED, NotificationCondition.BACKOFF):
        rows = base.filter(failed_issuance_attempts__gt=0, last_failure_time__isnull=False)
        if c == NotificationCondition.BACKOFF:
            rows = rows.filter(next_retry_time__gt=now)
    elif c == NotificationCondition.EXPIRING:
        rows = base.filter(not_after__lte=now + timedelta(days=rule.threshold or 14))
    else:  # RENEWAL_OVERDUE
        rows = base.filter(renewal_time__lt=now - OVERDUE_GRACE, not_after__isnull=False)
    for cert in rows[:LIMIT]:
        subject = f"Certificate/{cert.name}"
        attempts = cert.failed_issuance_attempts or 0
        failed = f"{attempts}@{_iso(cert.last_failure_time)}"
        if c == NotificationCondition.ISSUANCE_FAILED:
            title = f"Issuance failed: {cert.name}"
            body = (
                f"Certificate {cert.name} (issuer {cert.issuer.name}) failed to issue "
                f"(attempt {attempts}). The CA said: {_failure_reason(cert)}"
            )
            instance = failed
        elif c == NotificationCondition.BACKOFF:
            title = f"In failure backoff: {cert.name}"
            body = (
                f"Certificate {cert.name} failed {attempts} time(s) and waits; "
                f"next retry at {_iso(cert.next_retry_time)}."
            )
            instance = failed
        elif c == NotificationCondition.EXPIRING:
            title = f"Expiring: {cert.name}"
            body = (
                f"Certificate {cert.name} expires at {_iso(cert.not_after)} and has not been "
                f"renewed (threshold {rule.threshold or 14} days)."
            )
            instance = _iso(cert.not_after)
        else:
            title = f"Renewal overdue: {cert.name}"
            body = (
                f"Certificate {cert.name} should have been renewed at "
                f"{_iso(cert.renewal_time)}; it expires at {_iso(cert.not_after)}."
            )
            instance = _iso(cert.renewal_time)
        yield Finding(c, subject, cert.name, cert.issuer.name, instance, title, body)


def _approvals(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    waited = timedelta(minutes=rule.threshold or 30)
    rows = (
        CertificateRequest.objects.filter(approval=Approval.PENDING, created_at__lte=now - waited)
        .select_related("issuer")
        .only("name", "created_at", "issuer__name")
        .order_by("created_at")
    )
    for request in rows[:LIMIT]:
        yield Finding(
            rule.condition,
            f"CertificateRequest/{request.name}",
            request.name,
            request.issuer.name,
            request.name,
            f"Waiting for approval: {request.name}",
            f"CertificateRequest {request.name} has waited for approval since "
            f"{_iso(request.created_at)}.",
        )


def _servers(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    rows = AcmeServer.objects.filter(
        Q(paused_until__gt=now) | Q(unreachable_since__isnull=False)
    ).order_by("pk")
    for server in rows[:LIMIT]:
        if server.paused_until is not None and server.paused_until > now:
            instance = f"paused@{_iso(server.paused_until)}"
            body = (
                f"ACME server {server.directory_url} is paused until "
                f"{_iso(server.paused_until)}: {server.pause_reason or 'rate limited'}"
            )
        else:
            instance = f"unreachable@{_iso(server.unreachable_since)}"
            body = (
                f"ACME server {server.directory_url} is unreachable since "
                f"{_iso(server.unreachable_since)}: {server.unreachable_error}"
            )
        yield Finding(
            rule.condition,
            f"AcmeServer/{server.pk}",
            server.directory_url,
            "",
            instance,
            "CA paused or unreachable",
            body,
        )


def _ari(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    # The ARI controller records RenewalInfoMoved as a Warning only when the window moved
    # earlier than the planned renewal.
    rows = Event.objects.filter(
        reason="RenewalInfoMoved", type=Event.WARNING, created_at__gte=now - ARI_LOOKBACK
    ).order_by("-created_at")
    for event in rows[:LIMIT]:
        yield Finding(
            rule.condition,
            f"Certificate/{event.name}",
            event.name,
            "",
            f"event-{event.pk}",
            f"ARI window moved earlier: {event.name}",
            f"Certificate {event.name}: {event.message}",
        )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"


@dataclass(frozen=True)
class _Target:
    """A Kubernetes API server the console talks to, with its stored reachability."""

    subject: str  # "Cluster/prod", "KubeConnector/default"
    name: str  # matched by the rule's name pattern
    what: str  # "the API server of cluster prod", "the Kubernetes CSR connector's API server"
    unreachable_since: datetime | None
    last_outage_since: datetime | None
    reachable_again_at: datetime | None
    error: str
    state: str = ""  # a Cluster's state once reachable again, when not Connected


def _targets(down_before: datetime, ended_after: datetime | None) -> list[_Target]:
    """The CSR connector and the cert-manager Clusters in an outage that started at or before
    `down_before` and, with `ended_after`, those whose last outage ended after it: two
    queries."""
    fields = ("unreachable_since", "last_outage_since", "reachable_again_at")
    wanted = Q(unreachable_since__lte=down_before)
    if ended_after is not None:
        wanted |= Q(reachable_again_at__gt=ended_after)
    targets = [
        _Target(
            f"KubeConnector/{row.name}",
            "kube-connector",
            "the Kubernetes CSR connector's API server",
            row.unreachable_since,
            row.last_outage_since,
            row.reachable_again_at,
            f"{row.last_error} ({row.failures} failed attempts in a row)"
            if row.failures
            else row.last_error,
        )
        for row in KubeConnectorState.objects.filter(wanted)
        .only("name", "failures", "last_error", *fields)
        .order_by("pk")[:LIMIT]
    ]
    clusters = Cluster.objects.filter(wanted).only("name", "state", "last_error", *fields)
    for cluster in clusters.order_by("pk")[:LIMIT]:
        back = cluster.unreachable_since is None and cluster.state != ClusterState.CONNECTED
        targets.append(
            _Target(
                f"Cluster/{cluster.name}",
                cluster.name,
                f"the API server of cluster {cluster.name}",
                cluster.unreachable_since,
                cluster.last_outage_since,
                cluster.reachable_again_at,
                cluster.last_error,
                f"{cluster.state}: {cluster.last_error}" if back else "",
            )
        )
    return targets


def _outage_instance(since: datetime | None, prefix: str = "unreachable") -> str:
    # To the microsecond, as stored: two outages never share an instance (a flapping
    # cluster can start two in one second).
    return f"{prefix}@{since.isoformat() if since else '?'}"


def _unreachable(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    condition = NotificationCondition.CLUSTER_UNREACHABLE
    after = timedelta(minutes=rule.threshold) if rule.threshold else UNREACHABLE_AFTER
    ended_after = now - RESOLVED_WITHIN if rule.notify_resolved else None
    targets = _targets(now - after, ended_after)
    # "Resolved" only for an outage this channel was told about: one query for all of them.
    ended = [
        t
        for t in targets
        if ended_after is not None and t.reachable_again_at and t.reachable_again_at > ended_after
    ]
    told: set[tuple[str, str]] = set()
    if ended:
        told = set(
            Notification.objects.filter(
                channel_id=rule.channel_id,
                condition=condition,
                subject__in=[t.subject for t in ended],
                instance__in=[_outage_instance(t.last_outage_since) for t in ended],
            ).values_list("subject", "instance")
        )
    for t in targets:
        down_for = now - t.unreachable_since if t.unreachable_since else timedelta(0)
        if t.unreachable_since is not None and down_for >= after:
            yield Finding(
                condition,
                t.subject,
                t.name,
                "",
                _outage_instance(t.unreachable_since),
                f"Cluster unreachable: {t.name}",
                f"The console cannot reach {t.what} since "
                f"{_iso(t.unreachable_since)} ({_duration(down_for.total_seconds())}): "
                f"{t.error or 'no error recorded'}",
            )
        if (t.subject, _outage_instance(t.last_outage_since)) in told:
            assert t.last_outage_since is not None and t.reachable_again_at is not None
            lasted = (t.reachable_again_at - t.last_outage_since).total_seconds()
            state = f" (now {t.state})" if t.state else ""
            yield Finding(
                condition,
                t.subject,
                t.name,
                "",
                _outage_instance(t.last_outage_since, "resolved"),
                f"Cluster reachable again: {t.name}",
                f"The console reaches {t.what} again since "
                f"{_iso(t.reachable_again_at)}, after {_duration(lasted)} unreachable "
                f"(from {_iso(t.last_outage_since)}){state}.",
            )


# Endpoint unreachable: reported once it has lasted this long (a rule's threshold, in minutes,
# overrides it) and a second probe has seen it. A probe of a server that is not serving the
# current revision is repeated every 10 minutes (issuance/probing/schedule.py), so a server
# restarted during a probe is seen again, and well, before anyone is paged.
ENDPOINT_UNREACHABLE_AFTER = timedelta(minutes=10)
# Served certificate expiring: within this many days (a rule's threshold overrides it).
ENDPOINT_EXPIRING_DAYS = 14
_RESOLVED = "resolved:"


def _iso_z(moment: datetime) -> str:
    # As the probe stores notAfter (issuance/probing/assess.py), so that text compares as time.
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _endpoint_condition(rule: NotificationRule, now: datetime) -> Q:
    """The endpoints in the rule's condition now, as a filter on Endpoint."""
    c = canonical_condition(rule.condition)
    if c == NotificationCondition.ENDPOINT_STALE:
        return endpoint_q("Stale", now)
    if c == NotificationCondition.ENDPOINT_UNREACHABLE:
        after = timedelta(minutes=rule.threshold) if rule.threshold else ENDPOINT_UNREACHABLE_AFTER
        # served_since is the first probe that failed, probed_at the last one.
        return Q(match="error", served_since__lte=now - after, probed_at__gt=F("served_since"))
    if c == NotificationCondition.ENDPOINT_MISMATCH:
        read = Q(match__in=("current", "previous", "foreign"))
        wrong = (
            Q(match="foreign")
            | Q(last_probe__chainVerified=False)
            | Q(last_probe__hostnameMatch=False)
        )
        return read & wrong
    # ENDPOINT_EXPIRING: the served leaf, whichever it is.
    days = rule.threshold or ENDPOINT_EXPIRING_DAYS
    cutoff = _iso_z(now + timedelta(days=days))
    return Q(match__in=("current", "previous", "foreign"), not_after_text__lte=cutoff)


def _episode(endpoint: Endpoint, condition: str) -> str:
    """What makes one episode of an endpoint's condition: the endpoint and since when it
    serves what it serves (or fails as it fails); for expiry, the served leaf's notAfter."""
    if condition == NotificationCondition.ENDPOINT_EXPIRING:
        probe = endpoint.typed_last_probe
        return f"{endpoint.pk}@{probe['notAfter'] if probe else '?'}"
    return f"{endpoint.pk}@{endpoint.served_since.isoformat() if endpoint.served_since else '?'}"


def _endpoint_text(endpoint: Endpoint, rule: NotificationRule) -> tuple[str, str]:
    """Title and body of an endpoint's condition."""
    cert = endpoint.certificate
    probe = endpoint.typed_last_probe
    where = f"{endpoint.address} (certificate {cert.name})"
    since = _iso(endpoint.served_since)
    c = canonical_condition(rule.condition)
    if c == NotificationCondition.ENDPOINT_STALE:
        served = f"revision {endpoint.served_revision}" if endpoint.served_revision else "?"
        return (
            f"Served certificate stale: {cert.name}",
            f"{where} still serves {served}, not the current revision {cert.revision}, "
            f"more than {_duration(STALE_AFTER.total_seconds())} after it was issued "
            f"(serving it since {since}). Reload the server.",
        )
    if c == NotificationCondition.ENDPOINT_UNREACHABLE:
        error = f"{probe['errorKind']}: {probe['error']}" if probe else "no error recorded"
        return (
            f"Endpoint unreachable: {cert.name}",
            f"{where} could not be read since {since} (last probe {_iso(endpoint.probed_at)}): "
            f"{error}",
        )
    if c == NotificationCondition.ENDPOINT_MISMATCH:
        problems = []
        if endpoint.match == "foreign":
            problems.append(
                f"serves a certificate this one never had ({probe and probe['subject']})"
            )
        if probe and not probe["chainVerified"]:
            problems.append(f"the chain does not verify: {probe['chainError']}")
        if probe and not probe["hostnameMatch"]:
            problems.append(f"the certificate does not name {endpoint.name_checked}")
        return (
            f"Served chain or hostname mismatch: {cert.name}",
            f"{where}: {'; '.join(problems) or 'mismatch'} (since {since}).",
        )
    not_after = probe["notAfter"] if probe else "?"
    return (
        f"Served certificate expiring: {cert.name}",
        f"{where} serves a certificate that expires at {not_after} (serial "
        f"{probe['serial'] if probe else '?'}; threshold {rule.threshold or ENDPOINT_EXPIRING_DAYS} "
        f"days).",
    )


def _endpoints(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    """An endpoint condition: one message per episode (the endpoint and since when it is in
    the condition), and with notify_resolved one more when the episode ends. Three or four queries:
    the endpoints in the condition, the episodes this channel was told about and not told
    the end of, those episodes' endpoints (and, for removed ones, their certificates'
    issuers)."""
    condition = canonical_condition(rule.condition)
    base = (
        Endpoint.objects.select_related("certificate", "certificate__issuer")
        # The probe's notAfter as plain text (ISO 8601, "Z"): compared as text, not as JSON.
        .annotate(not_after_text=Cast(KT("last_probe__notAfter"), CharField()))
        .order_by("pk")
    )
    wanted = _endpoint_condition(rule, now)
    for endpoint in base.filter(wanted)[:LIMIT]:
        title, body = _endpoint_text(endpoint, rule)
        cert = endpoint.certificate
        yield Finding(
            condition,
            f"Certificate/{cert.name}",
            cert.name,
            cert.issuer.name,
            _episode(endpoint, condition),
            title,
            body,
        )
    if not rule.notify_resolved:
        return
    ended = Notification.objects.filter(
        channel_id=rule.channel_id,
        condition=condition,
        subject=OuterRef("subject"),
        instance=Concat(Value(_RESOLVED), OuterRef("instance")),
    )
    told = list(
        Notification.objects.filter(channel_id=rule.channel_id, condition=condition)
        .exclude(instance__startswith=_RESOLVED)
        .filter(~Exists(ended))
        .order_by("-created_at", "-id")
        .values_list("subject", "instance", "created_at")[:LIMIT]
    )
    ids = {int(instance.split("@", 1)[0]) for _, instance, _ in told if instance[:1].isdigit()}
    still = {e.pk: e for e in base.filter(pk__in=ids)}
    # The issuer of a removed endpoint's certificate, for the rule's issuer pattern (gone
    # with the certificate when that was deleted).
    removed = {subject.split("/", 1)[-1] for subject, instance, _ in told} - {
        e.certificate.name for e in still.values()
    }
    issuers = dict(
        Certificate.objects.filter(name__in=removed).values_list("name", "issuer__name")
        if removed
        else ()
    )
    matching = set(base.filter(wanted, pk__in=ids).values_list("pk", flat=True))
    for subject, instance, told_at in told:
        row = still.get(int(instance.split("@", 1)[0])) if instance[:1].isdigit() else None
        name = subject.split("/", 1)[-1]
        if row is None:
            yield Finding(
                condition,
                subject,
                name,
                issuers.get(name, ""),
                _RESOLVED + instance,
                f"Endpoint removed: {name}",
                f"An endpoint of certificate {name} that was reported "
                f"({NotificationCondition(condition).label.lower()}, {_iso(told_at)}) was "
                "removed: it is no longer checked.",
            )
            continue
        if _episode(row, condition) == instance and (
            row.pk in matching
            # A newer revision issued while the old one is still served: Deploying again
            # for an hour, then stale again, and the same episode all along.
            or (condition == NotificationCondition.ENDPOINT_STALE and row.match == "previous")
        ):
            continue  # the same episode goes on
        # When the episode ended: the probe that first saw what is served now, or else the
        # last probe. An ending seen long ago (a rule switched to notify_resolved since) is
        # not news.
        seen = row.served_since
        if seen is None or seen <= told_at:
            seen = row.probed_at
        if seen is None or seen < now - RESOLVED_WITHIN:
            continue
        cert = row.certificate
        yield Finding(
            condition,
            subject,
            cert.name,
            cert.issuer.name,
            _RESOLVED + instance,
            f"Resolved: {NotificationCondition(condition).label.lower()}: {cert.name}",
            f"{row.address} (certificate {cert.name}) is no longer "
            f"{_ENDED[condition]} (since {_iso(seen)}): it now "
            f"{_now_serving(row)}.",
        )


_ENDED: dict[str, str] = {
    NotificationCondition.ENDPOINT_STALE: "serving an older revision",
    NotificationCondition.ENDPOINT_UNREACHABLE: "unreachable",
    NotificationCondition.ENDPOINT_MISMATCH: "serving a mismatched chain or name",
    NotificationCondition.ENDPOINT_EXPIRING: "serving that expiring certificate",
}


def _now_serving(endpoint: Endpoint) -> str:
    if endpoint.match == "current":
        return f"serves the current revision ({endpoint.served_revision})"
    if endpoint.match == "previous":
        return f"serves revision {endpoint.served_revision}"
    if endpoint.match == "foreign":
        return "serves a certificate this one never had"
    if endpoint.match == "error":
        return "cannot be read"
    return "is not probed yet"


_FINDERS: dict[str, Callable[[NotificationRule, datetime], Iterator[Finding]]] = {
    NotificationCondition.ISSUANCE_FAILED: _certificates,
    NotificationCondition.BACKOFF: _certificates,
    NotificationCondition.EXPIRING: _certificates,
    NotificationCondition.RENEWAL_OVERDUE: _certificates,
    NotificationCondition.APPROVAL_WAITING: _approvals,
    NotificationCondition.CA_PAUSED: _servers,
    NotificationCondition.ARI_MOVED: _ari,
    NotificationCondition.CLUSTER_UNREACHABLE: _unreachable,
    NotificationCondition.ENDPOINT_STALE: _endpoints,
    NotificationCondition.ENDPOINT_UNREACHABLE: _endpoints,
    NotificationCondition.ENDPOINT_MISMATCH: _endpoints,
    NotificationCondition.ENDPOINT_EXPIRING: _endpoints,
}


def findings(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    finder = _FINDERS.get(NotificationCondition(canonical_condition(rule.condition)))
    if finder is None:
        return
    for finding in finder(rule, now):
        if rule.name_pattern and not fnmatch.fnmatchcase(finding.name, rule.name_pattern):
            continue
        if rule.issuer_pattern and not fnmatch.fnmatchcase(finding.issuer, rule.issuer_pattern):
            continue
        yield finding
