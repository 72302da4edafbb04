"""Each condition is found from the rows, with its instance (what makes it news again), and a
rule's name and issuer patterns filter what it reports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from issuance.models import (
    AcmeServer,
    CertificateRequest,
    Cluster,
    ClusterState,
    Event,
    Issuer,
    KubeConnectorState,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import deliver, detect
from issuance.observability import events
from tests.factories import make_certificate, make_cluster, make_selfsigned_issuer

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


# -- cluster unreachable ------------------------------------------------------------------------
# Timestamps are relative to the real clock: Cluster.save() stamps the outage with it.


def _unreachable_rule(**fields: object) -> NotificationRule:
    return rule(NotificationCondition.CLUSTER_UNREACHABLE, **fields)


def _down(
    cluster: Cluster, error: str = "CertificateRequest watch: ConnectionRefusedError"
) -> None:
    cluster.state, cluster.last_error = ClusterState.UNREACHABLE, error
    cluster.save(update_fields=["state", "last_error"])


def _up(cluster: Cluster) -> None:
    cluster.state, cluster.last_error = ClusterState.CONNECTED, ""
    cluster.save(update_fields=["state", "last_error"])


def _later(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def test_cluster_state_saves_keep_the_outage() -> None:
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    assert prod.unreachable_since is None
    _down(prod)
    since = Cluster.objects.get(pk=prod.pk).unreachable_since
    assert since is not None
    _down(prod, "another error")  # still the same outage
    assert Cluster.objects.get(pk=prod.pk).unreachable_since == since
    _up(prod)
    stored = Cluster.objects.get(pk=prod.pk)
    assert stored.unreachable_since is None
    assert stored.last_outage_since == since
    assert stored.reachable_again_at is not None and stored.reachable_again_at >= since
    # Unauthorized or no cert-manager is not "unreachable": the outage ended.
    _down(prod)
    prod.state = ClusterState.UNAUTHORIZED
    prod.save()
    assert Cluster.objects.get(pk=prod.pk).unreachable_since is None


def test_a_cluster_outage_is_reported_once_after_a_minute() -> None:
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    make_cluster("staging", state=ClusterState.CONNECTED)
    r = _unreachable_rule()
    _down(prod)
    assert list(detect.findings(r, _later(detect.UNREACHABLE_AFTER.total_seconds() - 5))) == []
    [finding] = detect.findings(r, _later(61))
    assert finding.subject == "Cluster/prod"
    assert finding.name == "prod"
    assert finding.title == "Cluster unreachable: prod"
    assert "ConnectionRefusedError" in finding.body
    since = Cluster.objects.get(pk=prod.pk).unreachable_since
    assert since is not None and finding.instance == f"unreachable@{since.isoformat()}"
    # Every later pass, from this process or another, finds the same outage: one message.
    assert deliver.record([r], _later(61)) == 1
    assert deliver.record([r], _later(120)) == 0
    assert deliver.record([r], _later(3600)) == 0
    assert Notification.objects.filter(condition="cluster_unreachable").count() == 1


def test_resolved_only_when_the_rule_asks_for_it() -> None:
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    quiet = _unreachable_rule()
    told = _unreachable_rule(notify_resolved=True)
    told.channel = NotificationChannel.objects.create(
        name="pager", url_ciphertext="x", url_hint="json://p***"
    )
    told.save()
    _down(prod)
    assert deliver.record([quiet, told], _later(90)) == 2
    _up(prod)
    assert deliver.record([quiet, told], _later(95)) == 1
    resolved = Notification.objects.get(instance__startswith="resolved@")
    assert resolved.channel.name == "pager"
    assert resolved.title == "Cluster reachable again: prod"
    assert "after" in resolved.body and "unreachable" in resolved.body
    assert deliver.record([quiet, told], _later(200)) == 0  # once
    # The next outage is a new one: reported again.
    _down(prod)
    assert deliver.record([quiet, told], _later(300)) == 2


def test_no_resolved_message_for_a_blip_or_an_old_outage() -> None:
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    r = _unreachable_rule(notify_resolved=True)
    _down(prod)
    _up(prod)  # back within the minute: nothing was sent, nothing is resolved
    assert deliver.record([r], _later(90)) == 0
    _down(prod)
    assert deliver.record([r], _later(90)) == 1
    _up(prod)
    # Reachable again more than RESOLVED_WITHIN ago (no worker ran meanwhile): too late.
    late = _later(detect.RESOLVED_WITHIN.total_seconds() + 120)
    assert deliver.record([r], late) == 0


def test_the_csr_connector_state_and_the_legacy_condition_value() -> None:
    since = timezone.now() - timedelta(minutes=5)
    KubeConnectorState.objects.create(
        unreachable_since=since, failures=7, last_error="MaxRetryError: refused"
    )
    r = rule("kube_disconnected")  # stored by a process of the version before 0018
    [finding] = detect.findings(r, timezone.now())
    assert finding.condition == NotificationCondition.CLUSTER_UNREACHABLE
    assert finding.subject == "KubeConnector/default"
    assert finding.name == "kube-connector"
    assert "CSR connector" in finding.body and "7 failed attempts in a row" in finding.body


def test_threshold_and_name_pattern() -> None:
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    other = make_cluster("edge", state=ClusterState.CONNECTED)
    _down(prod)
    _down(other)
    r = _unreachable_rule(threshold=10, name_pattern="pro*")
    assert list(detect.findings(r, _later(9 * 60))) == []
    assert [f.name for f in detect.findings(r, _later(10 * 60 + 1))] == ["prod"]


def test_detection_queries_do_not_grow_with_clusters(
    django_assert_num_queries: Callable[[int], AbstractContextManager[None]],
) -> None:
    r = _unreachable_rule(notify_resolved=True)
    KubeConnectorState.objects.create(unreachable_since=timezone.now())
    for i in range(12):
        cluster = make_cluster(f"c{i}", state=ClusterState.CONNECTED)
        _down(cluster)
        if i % 2:
            deliver.record([r], _later(70))
            _up(cluster)
    # One query each for the connector and the clusters, one for the outages told.
    with django_assert_num_queries(3):
        found = list(detect.findings(r, _later(80)))
    assert len([f for f in found if f.instance.startswith("resolved@")]) == 6
    assert len([f for f in found if f.instance.startswith("unreachable@")]) == 7


def test_migration_renames_the_condition() -> None:
    from django.apps import apps

    migration = importlib.import_module("issuance.migrations.0018_cluster_unreachable")
    old = rule("kube_disconnected")
    Notification.objects.create(
        channel=old.channel,
        condition="kube_disconnected",
        subject="KubeConnector/default",
        instance="x",
        title="t",
        body="b",
    )
    prod = make_cluster("prod", state=ClusterState.CONNECTED)
    Cluster.objects.filter(pk=prod.pk).update(state=ClusterState.UNREACHABLE)
    migration.rename_condition(apps, None)
    old.refresh_from_db()
    assert old.condition == "cluster_unreachable"
    assert Notification.objects.get().condition == "cluster_unreachable"
    stored = Cluster.objects.get(pk=prod.pk)
    assert stored.unreachable_since == stored.updated_at
