"""/metrics for mirrored cert-manager objects: per cluster and namespace, the database's
numbers, at a scrape cost that does not grow with the objects."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from issuance.acme import health
from issuance.models import Cluster, ClusterAction, ClusterResource, ClusterState
from tests.live.mirrored import certificate_row, make_certificate_row, make_cluster
from tests.metrics.test_metrics import Samples, scrape, value

pytestmark = pytest.mark.django_db


def _action(cluster: Cluster, state: str, created_ago: timedelta) -> ClusterAction:
    return ClusterAction.objects.create(
        cluster=cluster,
        action="renew",
        kind="Certificate",
        namespace="team-a",
        name="web",
        actor="alice",
        state=state,
        created_at=timezone.now() - created_ago,
    )


def test_cluster_metrics_reflect_the_database() -> None:
    now = timezone.now().replace(microsecond=0)
    prod = make_cluster(
        "prod",
        last_sync=now - timedelta(seconds=5),
        checked_at=now - timedelta(minutes=1),
        missing_permissions=["approve signers.cert-manager.io", "watch events"],
    )
    staging = make_cluster("staging", state=ClusterState.UNREACHABLE)

    soon = now + timedelta(days=3)
    make_certificate_row(prod, "team-a", "web", not_after=now + timedelta(days=60))
    make_certificate_row(prod, "team-a", "api", not_after=soon)
    make_certificate_row(
        prod,
        "team-a",
        "broken",
        ready="False",
        failed_attempts=3,
        next_retry_at=now + timedelta(hours=4),
    )
    make_certificate_row(prod, "team-a", "old", ready="False", not_after=now - timedelta(days=1))
    make_certificate_row(prod, "team-b", "new", ready="")
    make_certificate_row(staging, "team-a", "web")
    make_certificate_row(prod, "team-a", "web-1", kind="CertificateRequest", ready="False")
    make_certificate_row(
        prod, "team-a", "web-2", kind="CertificateRequest", ready="True", state="Approved"
    )
    make_certificate_row(prod, "", "letsencrypt", kind="ClusterIssuer")

    oldest = _action(prod, "Pending", timedelta(minutes=10))
    _action(prod, "Pending", timedelta(minutes=2))
    _action(prod, "Done", timedelta(hours=1))
    _action(prod, "Failed", timedelta(hours=2))

    s = scrape()
    assert value(s, "issuance_cluster_up", cluster="prod") == 1
    assert value(s, "issuance_cluster_up", cluster="staging") == 0
    assert value(s, "issuance_cluster_state", cluster="staging", state="Unreachable") == 1
    assert value(s, "issuance_cluster_state", cluster="staging", state="Connected") == 0
    assert len([1 for lab, _ in s["issuance_cluster_state"] if lab["cluster"] == "prod"]) == len(
        ClusterState.values
    )
    assert (
        value(s, "issuance_cluster_last_sync_timestamp_seconds", cluster="prod")
        == (now - timedelta(seconds=5)).timestamp()
    )
    assert [lab["cluster"] for lab, _ in s["issuance_cluster_last_sync_timestamp_seconds"]] == [
        "prod"
    ]
    assert (
        value(s, "issuance_cluster_checked_timestamp_seconds", cluster="prod")
        == (now - timedelta(minutes=1)).timestamp()
    )
    assert value(s, "issuance_cluster_missing_permissions", cluster="prod") == 2
    assert value(s, "issuance_cluster_missing_permissions", cluster="staging") == 0

    actions = "issuance_cluster_actions"
    assert value(s, actions, cluster="prod", state="Pending") == 2
    assert value(s, actions, cluster="prod", state="Done") == 1
    assert value(s, actions, cluster="prod", state="Failed") == 1
    assert value(s, actions, cluster="staging", state="Pending") == 0
    pending_since = "issuance_cluster_action_oldest_pending_timestamp_seconds"
    assert value(s, pending_since, cluster="prod") == pytest.approx(oldest.created_at.timestamp())
    assert [lab["cluster"] for lab, _ in s[pending_since]] == ["prod"]

    certs = "issuance_cluster_certificates"
    assert value(s, certs, cluster="prod", namespace="team-a", ready="True") == 2
    assert value(s, certs, cluster="prod", namespace="team-a", ready="False") == 2
    assert value(s, certs, cluster="prod", namespace="team-a", ready="Unknown") == 0
    assert value(s, certs, cluster="prod", namespace="team-b", ready="Unknown") == 1
    assert value(s, certs, cluster="staging", namespace="team-a", ready="True") == 1
    assert len(s[certs]) == 3 * 3  # three namespaces with Certificates, three statuses
    assert (
        value(s, "issuance_cluster_certificates_failing", cluster="prod", namespace="team-a") == 1
    )
    assert (
        value(s, "issuance_cluster_certificates_in_backoff", cluster="prod", namespace="team-a")
        == 1
    )
    assert (
        value(s, "issuance_cluster_certificates_expired", cluster="prod", namespace="team-a") == 1
    )
    assert (
        value(s, "issuance_cluster_certificates_expired", cluster="prod", namespace="team-b") == 0
    )
    earliest = "issuance_cluster_certificate_expiration_earliest_timestamp_seconds"
    assert (
        value(s, earliest, cluster="prod", namespace="team-a")
        == (now - timedelta(days=1)).timestamp()
    )
    assert [(lab["cluster"], lab["namespace"]) for lab, _ in s[earliest]] == [("prod", "team-a")]

    kinds = "issuance_cluster_resources"
    assert value(s, kinds, cluster="prod", kind="Certificate") == 5
    assert value(s, kinds, cluster="prod", kind="CertificateRequest") == 2
    assert value(s, kinds, cluster="prod", kind="ClusterIssuer") == 1
    assert value(s, kinds, cluster="staging", kind="Order") == 0
    pending = "issuance_cluster_certificate_requests_pending_approval"
    assert value(s, pending, cluster="prod", namespace="team-a") == 1

    # No series per object: the mirrored families are labelled by cluster and namespace.
    for name, samples in s.items():
        if name.startswith("issuance_cluster_"):
            assert all("name" not in labels for labels, _ in samples), name

    # The numbers follow the database.
    ClusterResource.objects.filter(name="broken").delete()
    after = scrape()
    assert (
        value(after, "issuance_cluster_certificates_failing", cluster="prod", namespace="team-a")
        == 0
    )


def _queries() -> tuple[int, Samples]:
    health.forget()  # each scrape reads the outages (cached for a second per process)
    with CaptureQueriesContext(connection) as ctx:
        samples = scrape()
    return len(ctx.captured_queries), samples


def test_scrape_cost_does_not_grow_with_mirrored_objects() -> None:
    clusters = [make_cluster("prod"), make_cluster("staging")]
    ClusterResource.objects.bulk_create(
        certificate_row(clusters[i % 2], f"ns-{i % 5}", f"c{i}") for i in range(10)
    )
    few, _ = _queries()
    ClusterResource.objects.bulk_create(
        certificate_row(clusters[i % 2], f"ns-{i % 5}", f"bulk{i}", ready="False")
        for i in range(490)
    )
    many, samples = _queries()
    assert many == few
    assert few <= 13  # tests/metrics/test_metrics.py's budget for the whole scrape
    certs = "issuance_cluster_certificates"
    assert sum(v for _, v in samples[certs]) == 500
    # Series grow with namespaces, not objects: 2 clusters × 5 namespaces × 3 statuses.
    assert len(samples[certs]) == 2 * 5 * 3
