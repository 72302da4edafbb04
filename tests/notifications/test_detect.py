"""Each condition is found from the rows, with its instance (what makes it news again), and a
rule's name and issuer patterns filter what it reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from issuance import events
from issuance.models import (
    AcmeServer,
    CertificateRequest,
    Event,
    Issuer,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import deliver, detect
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)


def rule(condition: str, **fields: object) -> NotificationRule:
    channel = NotificationChannel.objects.first() or NotificationChannel.objects.create(
        name="ops", url_ciphertext="x", url_hint="json://h***"
    )
    return NotificationRule.objects.create(
        name=f"r{NotificationRule.objects.count()}",
        channel=channel,
        condition=condition,
        **fields,
    )


def found(r: NotificationRule) -> list[detect.Finding]:
    return list(detect.findings(r, NOW))


def test_expiring_within_n_days_until_renewed() -> None:
    issuer = make_selfsigned_issuer()
    soon = make_certificate("soon", issuer)
    later = make_certificate("later", issuer)
    soon.not_after = NOW + timedelta(days=5)
    later.not_after = NOW + timedelta(days=40)
    soon.save()
    later.save()
    r = rule(NotificationCondition.EXPIRING, threshold=10)
    assert [f.subject for f in found(r)] == ["Certificate/soon"]
    assert deliver.record([r], NOW) == 1
    assert deliver.record([r], NOW + timedelta(minutes=1)) == 0  # same expiry: no repeat
    soon.not_after = NOW + timedelta(days=8)  # a renewal that still ends inside the window
    soon.save()
    assert deliver.record([r], NOW + timedelta(minutes=2)) == 1


def test_renewal_overdue() -> None:
    cert = make_certificate("late", make_selfsigned_issuer())
    cert.not_after = NOW + timedelta(days=3)
    cert.renewal_time = NOW - timedelta(hours=2)
    cert.save()
    [finding] = found(rule(NotificationCondition.RENEWAL_OVERDUE))
    assert "should have been renewed at 2026-11-24T01:00:00+00:00" in finding.body


def test_csr_waiting_for_approval_longer_than_n_minutes() -> None:
    issuer = make_selfsigned_issuer()
    old = CertificateRequest.objects.create(name="old", issuer=issuer, spec={"request": ""})
    CertificateRequest.objects.filter(pk=old.pk).update(created_at=NOW - timedelta(minutes=45))
    CertificateRequest.objects.create(name="new", issuer=issuer, spec={"request": ""})
    CertificateRequest.objects.filter(name="new").update(created_at=NOW - timedelta(minutes=5))
    r = rule(NotificationCondition.APPROVAL_WAITING, threshold=30)
    assert [f.subject for f in found(r)] == ["CertificateRequest/old"]


def test_ca_paused_and_unreachable() -> None:
    AcmeServer.objects.create(
        directory_url="https://a.example/dir",
        paused_until=NOW + timedelta(minutes=10),
        pause_reason="rateLimited: too many orders",
    )
    AcmeServer.objects.create(
        directory_url="https://b.example/dir",
        unreachable_since=NOW - timedelta(minutes=3),
        unreachable_error="connection refused",
    )
    bodies = sorted(f.body for f in found(rule(NotificationCondition.CA_PAUSED)))
    assert "too many orders" in bodies[0]
    assert "connection refused" in bodies[1]


def test_ari_window_moved_earlier() -> None:
    events.record(
        "Certificate", "web", "RenewalInfoMoved", "The CA suggests …", type_=Event.WARNING
    )
    events.record("Certificate", "api", "RenewalInfoMoved", "later", type_=Event.NORMAL)
    Event.objects.update(created_at=NOW - timedelta(hours=1))
    [finding] = found(rule(NotificationCondition.ARI_MOVED))
    assert finding.subject == "Certificate/web"


def test_patterns_filter_by_name_and_issuer() -> None:
    make_selfsigned_issuer("prod")
    make_selfsigned_issuer("staging")
    for name, issuer in (("web-a", "prod"), ("web-b", "staging"), ("api", "prod")):
        cert = make_certificate(name, Issuer.objects.get(name=issuer))
        cert.not_after = NOW + timedelta(days=1)
        cert.save()
    r = rule(NotificationCondition.EXPIRING, name_pattern="web-*", issuer_pattern="prod")
    assert [f.name for f in found(r)] == ["web-a"]


def test_disabled_channel_or_rule_creates_nothing() -> None:
    cert = make_certificate("soon", make_selfsigned_issuer())
    cert.not_after = NOW + timedelta(days=1)
    cert.save()
    r = rule(NotificationCondition.EXPIRING, enabled=False)
    assert deliver.detect_pass(NOW) == 0
    r.enabled = True
    r.save()
    NotificationChannel.objects.update(enabled=False)
    assert deliver.detect_pass(NOW) == 0
    NotificationChannel.objects.update(enabled=True)
    assert deliver.detect_pass(NOW) == 1
    assert Notification.objects.get().title == "Expiring: soon"
