"""Finding the conditions worth a message, from the database, with bounded queries.

Each finding has an `instance`: what makes it new. A Notification row is keyed by (channel,
condition, subject, instance), so a certificate that keeps failing with the same attempt
count is reported once; attempt 4 (a new instance) is reported again, as is a new expiry
date after a renewal that did not help.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from issuance.models import (
    AcmeServer,
    Approval,
    Certificate,
    CertificateRequest,
    Event,
    NotificationCondition,
    NotificationRule,
)

# At most this many subjects per rule and pass (a flood is reported over several passes;
# the ones already reported are skipped by the unique key, so the pass moves on).
LIMIT = 200
# Renewal is overdue once the renewal time is this far in the past.
OVERDUE_GRACE = timedelta(hours=1)
# ARI moves looked for in the timeline this far back.
ARI_LOOKBACK = timedelta(days=2)
# The Kubernetes watcher counts as disconnected after this many failures in a row.
KUBE_FAILURES = 3


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


def _kube(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    from issuance.kube import connector

    conn = connector._connector.get("default")
    if conn is None:
        return
    failures = conn.watcher.failures
    if failures < KUBE_FAILURES:
        _kube_outage.clear()
        return
    started = _kube_outage.setdefault("since", now)
    yield Finding(
        rule.condition,
        "KubeConnector/default",
        "kube-connector",
        "",
        _iso(started),
        "Kubernetes connector disconnected",
        f"The Kubernetes connector has failed {failures} times in a row since {_iso(started)}.",
    )


# When the current Kubernetes outage was first seen (this process).
_kube_outage: dict[str, datetime] = {}

_FINDERS = {
    NotificationCondition.ISSUANCE_FAILED: _certificates,
    NotificationCondition.BACKOFF: _certificates,
    NotificationCondition.EXPIRING: _certificates,
    NotificationCondition.RENEWAL_OVERDUE: _certificates,
    NotificationCondition.APPROVAL_WAITING: _approvals,
    NotificationCondition.CA_PAUSED: _servers,
    NotificationCondition.ARI_MOVED: _ari,
    NotificationCondition.KUBE_DISCONNECTED: _kube,
}


def findings(rule: NotificationRule, now: datetime) -> Iterator[Finding]:
    finder = _FINDERS.get(NotificationCondition(rule.condition))
    if finder is None:
        return
    for finding in finder(rule, now):
        if rule.name_pattern and not fnmatch.fnmatchcase(finding.name, rule.name_pattern):
            continue
        if rule.issuer_pattern and not fnmatch.fnmatchcase(finding.issuer, rule.issuer_pattern):
            continue
        yield finding
