"""issuance.observability.publish for mirrored cert-manager objects: the k8s topics, after commit only, one
message per object and topic, and a re-list coalesced into one summary per topic."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from issuance.models import Cluster, ClusterResource, ClusterState
from issuance.observability import publish
from tests.live.mirrored import (
    certificate_row,
    make_certificate_row,
    make_cluster,
    make_event,
)

pytestmark = pytest.mark.django_db(transaction=True)

Sent = list[tuple[str, dict[str, Any]]]
TEAM_A = ["k8s", "k8s:prod", "k8s:prod/team-a"]


@pytest.fixture
def sent() -> Iterator[Sent]:
    messages: Sent = []

    def record(topic: str, message: dict[str, Any]) -> None:
        messages.append((topic, message))

    publish.subscribe(record)
    yield messages
    publish.unsubscribe(record)


@pytest.fixture
def prod() -> Cluster:
    return make_cluster("prod")


def of_type(sent: Sent, type_: str) -> Sent:
    return [(t, m) for t, m in sent if m["type"] == type_]


def test_saved_resource_reaches_its_three_topics_after_commit(sent: Sent, prod: Cluster) -> None:
    retry = timezone.now().replace(microsecond=0) + timedelta(hours=2)
    sent.clear()
    with transaction.atomic():
        row = make_certificate_row(prod, "team-a", "web", ready="False")
        for attempts in (1, 2, 3):
            row.failed_attempts = attempts
            row.next_retry_at = retry
            row.save()
        assert sent == [], "published before commit"
    assert [t for t, _ in sent] == TEAM_A
    message = sent[0][1]
    assert all(m == message for _, m in sent)
    assert message["type"] == "mirror.changed"
    assert (message["kind"], message["cluster"], message["namespace"], message["name"]) == (
        "Certificate",
        "prod",
        "team-a",
        "web",
    )
    assert (message["ready"], message["reason"], message["failed_attempts"]) == (
        "False",
        "Failed",
        3,
    )
    assert message["next_retry_at"] == retry.isoformat()
    assert message["deleted"] is False
    assert message["at"]
    assert "body" not in message


def test_rollback_sends_nothing(sent: Sent, prod: Cluster) -> None:
    sent.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        make_certificate_row(prod, "team-a", "never")
        raise RuntimeError("abort")
    assert sent == []
    assert not ClusterResource.objects.filter(name="never").exists()


def test_deleted_resource(sent: Sent, prod: Cluster) -> None:
    row = make_certificate_row(prod, "team-a", "gone")
    sent.clear()
    with transaction.atomic():
        row.delete()
        assert sent == []
    assert [(t, m["type"], m["name"], m["deleted"]) for t, m in sent] == [
        (t, "mirror.changed", "gone", True) for t in TEAM_A
    ]


def test_queryset_delete_is_published_per_row(sent: Sent, prod: Cluster) -> None:
    for name in ("a", "b"):
        make_certificate_row(prod, "team-a", name)
    sent.clear()
    ClusterResource.objects.filter(namespace="team-a").delete()
    deleted = [(t, m["name"]) for t, m in sent if m["deleted"]]
    assert sorted(deleted) == sorted((t, n) for n in ("a", "b") for t in TEAM_A)


def test_cluster_scoped_object_goes_to_the_cluster_topics(sent: Sent, prod: Cluster) -> None:
    sent.clear()
    make_certificate_row(prod, "", "letsencrypt", kind="ClusterIssuer")
    assert [(t, m["kind"]) for t, m in sent] == [
        ("k8s", "ClusterIssuer"),
        ("k8s:prod", "ClusterIssuer"),
    ]


def test_kubernetes_event(sent: Sent, prod: Cluster) -> None:
    sent.clear()
    with transaction.atomic():
        make_event(prod, "team-a", "web", "Failed")
    events = of_type(sent, "mirror.event")
    assert [t for t, _ in events] == TEAM_A
    message = events[0][1]
    assert (message["cluster"], message["kind"], message["name"], message["reason"]) == (
        "prod",
        "Certificate",
        "web",
        "Failed",
    )
    assert message["eventType"] == "Warning"


def test_relist_of_1000_objects_is_one_message_per_topic(sent: Sent, prod: Cluster) -> None:
    rows = ClusterResource.objects.bulk_create(
        certificate_row(prod, f"ns-{i % 4}", f"c{i}") for i in range(1000)
    )
    sent.clear()
    # A re-list saves every object again, each with save() (post_save), in one transaction.
    with transaction.atomic():
        for row in rows:
            row.resource_version = "2"
            row.save()
        make_event(prod, "ns-0", "c0", "Issuing")
    topics = Counter(t for t, _ in sent)
    assert topics == Counter(["k8s", "k8s:prod", *(f"k8s:prod/ns-{i}" for i in range(4))])
    by_topic = {t: m for t, m in sent}
    assert by_topic["k8s"]["type"] == "mirror.many"
    assert (by_topic["k8s"]["changed"], by_topic["k8s"]["events"]) == (1000, 1)
    assert by_topic["k8s:prod/ns-1"] == {
        "type": "mirror.many",
        "cluster": "prod",
        "namespace": "ns-1",
        "changed": 250,
        "deleted": 0,
        "events": 0,
        "kinds": ["Certificate"],
        "at": by_topic["k8s:prod/ns-1"]["at"],
    }


def test_small_transactions_keep_per_object_messages(sent: Sent, prod: Cluster) -> None:
    sent.clear()
    with transaction.atomic():
        for i in range(publish.MIRROR_DETAIL_LIMIT):
            make_certificate_row(prod, "team-a", f"c{i}")
    assert len(sent) == 3 * publish.MIRROR_DETAIL_LIMIT
    assert {m["type"] for _, m in sent} == {"mirror.changed"}


def test_cluster_state_changes_are_published(sent: Sent) -> None:
    sent.clear()
    cluster = make_cluster("staging", state=ClusterState.PENDING)
    assert [(t, m["type"], m["state"]) for t, m in sent] == [
        ("k8s", "cluster.status", "Pending"),
        ("k8s:staging", "cluster.status", "Pending"),
    ]
    sent.clear()
    # The sync's bookkeeping is not news.
    cluster = Cluster.objects.get(pk=cluster.pk)
    cluster.last_sync = timezone.now()
    cluster.sync_owner = "worker-1"
    cluster.save()
    assert sent == []
    cluster.state = ClusterState.UNREACHABLE
    cluster.last_error = "dial tcp 10.0.0.1:6443: connection refused"
    cluster.save()
    assert [(t, m["state"]) for t, m in sent] == [
        ("k8s", "Unreachable"),
        ("k8s:staging", "Unreachable"),
    ]
    assert set(sent[0][1]) == {"type", "cluster", "state", "deleted", "at"}
    sent.clear()
    cluster.save()  # unchanged since the last publish
    assert sent == []


def test_no_kubeconfig_in_any_message(sent: Sent) -> None:
    cluster = make_cluster("secretive")
    make_certificate_row(cluster, "team-a", "web")
    make_event(cluster, "team-a", "web", "Issuing")
    cluster.state = ClusterState.UNAUTHORIZED
    cluster.save()
    cluster.delete()
    text = json.dumps([m for _, m in sent])
    assert "not-a-real-token" not in text
    assert "kubeconfig" not in text.lower()
    assert cluster.kubeconfig_ciphertext not in text


def test_removing_a_cluster_publishes_its_objects_deletion(sent: Sent) -> None:
    cluster = make_cluster("old")
    make_certificate_row(cluster, "team-a", "web")
    make_event(cluster, "team-a", "web", "Issuing")
    sent.clear()
    cluster.delete()
    got = sorted((t, m["type"], m["deleted"]) for t, m in sent)
    assert got == sorted(
        [("k8s", "cluster.status", True), ("k8s:old", "cluster.status", True)]
        + [
            (t, kind, True)
            for t in ["k8s", "k8s:old", "k8s:old/team-a"]
            for kind in ("mirror.changed", "mirror.event")
        ]
    )
