"""The cluster sync against two real kube-apiservers (tests/clusters/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from issuance.kubernetes.certmanager import kinds, sync
from issuance.kubernetes.certmanager.sync import Syncer
from issuance.models import Cluster, ClusterEvent
from issuance.models.cluster import ClusterState
from tests.clusters import cm
from tests.clusters.conftest import CmCluster
from tests.clusters.syncing import (
    row,
    row_if,
    running_syncer,
    state,
    sync_until,
)
from tests.factories import make_cluster as add_cluster
from tests.helpers import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


@pytest.fixture
def syncer() -> Iterator[Syncer]:
    yield from running_syncer()


EVERYTHING = ["cert-manager.io/v1", "acme.cert-manager.io/v1"]


def core_event(namespace: str, about: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """A core/v1 Event as cert-manager's recorder writes it."""
    meta = about["metadata"]
    return {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": about["apiVersion"],
            "kind": about["kind"],
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
        "reason": reason,
        "message": message,
        "type": "Normal",
        "count": 1,
        "firstTimestamp": cm.ts(cm.now()),
        "lastTimestamp": cm.ts(cm.now()),
        "source": {"component": "cert-manager-certificates-issuing"},
    }


def test_two_clusters_mirrored_with_their_chains_and_deletions(
    cm_a: CmCluster, cm_b: CmCluster, namespace: str, syncer: Syncer
) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    staging = add_cluster("staging", cm_b.console_kubeconfig)
    a, b = cm_a.objects(), cm_b.objects()
    failed_at = cm.now() - timedelta(minutes=10)
    web_a = a.create(cm.certificate("web", namespace), cm.failed_status(2, failed_at))
    web_b = b.create(cm.certificate("web", namespace), cm.ready_status(cm.now()))
    # The chain arrives children first: the Challenge and Order learn their Certificate
    # when their owners arrive.
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "web"), what="web in prod")
    sync_until(syncer, lambda: row(staging, "Certificate", namespace, "web"), what="in staging")

    made_request = a.create(cm.owned_by(cm.certificate_request("web-1", namespace, "web"), web_a))
    order = a.create(
        cm.owned_by(cm.order("web-1-1", namespace, "web-1", "web.example.com"), made_request)
    )
    challenge = a.create(
        cm.owned_by(cm.challenge("web-1-1-0", namespace, "web.example.com"), order),
        {"state": "pending", "processing": True, "presented": False, "reason": ""},
    )
    a.create(
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": {"name": "ca", "namespace": namespace},
            "spec": {"ca": {"secretName": "ca-key-pair"}},
        },
        {"conditions": [{"type": "Ready", "status": "True", "reason": "KeyPairVerified"}]},
    )
    ch = sync_until(
        syncer,
        lambda: row_if(prod, "Challenge", namespace, "web-1-1-0", lambda r: r.certificate_name),
        what="challenge linked to its certificate",
    )
    assert (ch.owner_kind, ch.owner_name, ch.state) == ("Order", "web-1-1", "pending")
    assert ch.uid == challenge["metadata"]["uid"]
    order_row = row(prod, "Order", namespace, "web-1-1")
    assert order_row is not None and order_row.certificate_name == "web"
    assert (order_row.owner_kind, order_row.owner_name) == ("CertificateRequest", "web-1")
    cr = row(prod, "CertificateRequest", namespace, "web-1")
    assert cr is not None and (cr.certificate_name, cr.state, cr.issuer_name) == ("web", "", "ca")
    issuer = sync_until(syncer, lambda: row(prod, "Issuer", namespace, "ca"))
    assert (issuer.ready, issuer.state) == ("True", "ca")

    # Labelled by cluster and namespace; the columns read off each body.
    cert_a = row(prod, "Certificate", namespace, "web")
    cert_b = row(staging, "Certificate", namespace, "web")
    assert cert_a is not None and cert_b is not None
    assert cert_a.uid == web_a["metadata"]["uid"] and cert_b.uid == web_b["metadata"]["uid"]
    assert (cert_a.ready, cert_a.reason, cert_a.failed_attempts) == ("False", "DoesNotExist", 2)
    assert cert_a.message.startswith("The certificate request has failed to complete")
    assert cert_a.next_retry_at == failed_at + timedelta(hours=2)
    assert (cert_a.issuer_name, cert_a.issuer_kind) == ("letsencrypt", "ClusterIssuer")
    assert cert_b.ready == "True" and cert_b.next_retry_at is None
    assert cert_b.renewal_time is not None and cert_b.not_after is not None
    assert "managedFields" not in cert_a.body["metadata"]
    assert cert_a.resource_version == web_a["metadata"]["resourceVersion"]

    # Approval in the cluster, then an update: the row follows.
    approved = a.set_status(
        made_request,
        {
            "conditions": [
                {"type": "Approved", "status": "True", "reason": "policy.cert-manager.io"}
            ]
        },
    )
    sync_until(
        syncer,
        lambda: row_if(prod, "CertificateRequest", namespace, "web-1", lambda r: r.state),
        what="approval mirrored",
    )
    cr = row(prod, "CertificateRequest", namespace, "web-1")
    assert cr is not None and cr.resource_version == approved["metadata"]["resourceVersion"]
    fixed = a.set_status(a.get("Certificate", namespace, "web"), cm.ready_status(cm.now()))
    sync_until(
        syncer,
        lambda: row_if(prod, "Certificate", namespace, "web", lambda r: r.ready == "True"),
        what="certificate ready",
    )
    cert_a.refresh_from_db()
    assert cert_a.next_retry_at is None and cert_a.failed_attempts == 0
    assert cert_a.resource_version == fixed["metadata"]["resourceVersion"]

    # Kubernetes Events about cert-manager objects become the timeline; others are not kept.
    b.core.create_namespaced_event(
        namespace, core_event(namespace, web_b, "Issuing", "Issued temporary certificate")
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "uid": "u", "resourceVersion": "1"},
    }
    b.core.create_namespaced_event(namespace, core_event(namespace, pod, "Pulled", "image"))
    ev = sync_until(
        syncer,
        lambda: ClusterEvent.objects.filter(cluster=staging, namespace=namespace).first(),
        what="event mirrored",
    )
    assert (ev.involved_kind, ev.involved_name, ev.reason) == ("Certificate", "web", "Issuing")
    assert ev.involved_uid == web_b["metadata"]["uid"]
    assert ev.source == "cert-manager-certificates-issuing" and ev.count == 1
    assert not ClusterEvent.objects.filter(involved_kind="Pod").exists()

    # Deleted in staging: its row (and its timeline) go; prod's namesake stays.
    b.delete("Certificate", namespace, "web")
    sync_until(
        syncer, lambda: row(staging, "Certificate", namespace, "web") is None, what="deleted"
    )
    assert not ClusterEvent.objects.filter(cluster=staging, involved_uid=ev.involved_uid).exists()
    assert row(prod, "Certificate", namespace, "web") is not None

    for cluster in (prod, staging):
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.CONNECTED, cluster.last_error
        assert cluster.api_versions == EVERYTHING
        assert cluster.missing_permissions == []
        assert cluster.last_sync is not None and cluster.checked_at is not None
        assert cluster.sync_owner == "worker-1"


def test_410_gone_lists_again_and_finds_what_changed_meanwhile(
    cm_a: CmCluster, namespace: str, syncer: Syncer
) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    a = cm_a.objects()
    a.create(cm.certificate("gone", namespace))
    a.create(cm.certificate("kept", namespace))
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "kept"), what="listed")
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "gone"), what="listed")
    watcher = syncer.syncs[prod.pk].watchers["Certificate"]
    lists = watcher.lists
    watcher.stop()
    assert not watcher.alive
    # Meanwhile: one deleted, one added; then resume from a resourceVersion long compacted.
    a.delete("Certificate", namespace, "gone")
    a.create(cm.certificate("new", namespace))
    watcher.resource_version = "1"
    watcher.start()
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "new"), what="after 410")
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "gone") is None, what="gone")
    assert watcher.lists > lists
    assert row(prod, "Certificate", namespace, "kept") is not None


def test_apiserver_killed_and_restarted(cm_a: CmCluster, namespace: str, syncer: Syncer) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    a = cm_a.objects()
    before = a.create(cm.certificate("before", namespace))
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "before"), what="mirrored")
    sync_until(syncer, lambda: state(prod) == ClusterState.CONNECTED, what="connected")
    cm_a.server.kill_apiserver()
    try:
        down = time.monotonic()
        sync_until(syncer, lambda: state(prod) == ClusterState.UNREACHABLE, 60, what="unreachable")
        noticed = time.monotonic() - down
        prod.refresh_from_db()
        assert "watch" in prod.last_error
    finally:
        cm_a.server.start_apiserver()
    back = time.monotonic()
    a = cm_a.objects()
    a.set_status(a.get("Certificate", namespace, "before"), cm.ready_status(cm.now()))
    a.create(cm.certificate("after", namespace))
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "after"), 90, what="after")
    sync_until(
        syncer,
        lambda: row_if(prod, "Certificate", namespace, "before", lambda r: r.ready == "True"),
        what="update made after the restart",
    )
    sync_until(syncer, lambda: state(prod) == ClusterState.CONNECTED, what="connected again")
    recovered = time.monotonic() - back
    print(
        f"\nunreachable noticed after {noticed:.1f}s; mirrored again {recovered:.1f}s after ready"
    )
    kept = row(prod, "Certificate", namespace, "before")
    assert kept is not None and kept.uid == before["metadata"]["uid"]  # updated, not replaced


def test_missing_permissions_reported_and_only_allowed_kinds_watched(
    cm_a: CmCluster, namespace: str, syncer: Syncer
) -> None:
    limited = add_cluster("limited", cm_a.limited_kubeconfig)
    full = add_cluster("full", cm_a.console_kubeconfig)
    cm_a.objects().create(cm.certificate("seen", namespace))
    sync_until(syncer, lambda: row(limited, "Certificate", namespace, "seen"), what="mirrored")
    limited.refresh_from_db()
    granted = {f"{verb} certificates.cert-manager.io" for verb in ("get", "list", "watch")}
    expected = [str(a) for a in kinds.required_access() if str(a) not in granted]
    assert limited.missing_permissions == expected
    assert "approve signers.cert-manager.io" in limited.missing_permissions
    assert "update certificates/status.cert-manager.io" in limited.missing_permissions
    assert limited.state == ClusterState.CONNECTED  # it can mirror what it may
    assert set(syncer.syncs[limited.pk].watchers) == {"Certificate"}
    sync_until(syncer, lambda: Cluster.objects.get(pk=full.pk).checked_at, what="checked")
    full.refresh_from_db()
    assert full.missing_permissions == []
    assert set(syncer.syncs[full.pk].watchers) == {*(k.kind for k in kinds.MIRRORED), "Event"}


def test_bad_token_is_unauthorized(cm_a: CmCluster, syncer: Syncer) -> None:
    bogus = add_cluster("bogus", cm_a.kubeconfig_for("not-a-token-" + "0" * 20))
    sync_until(syncer, lambda: state(bogus) == ClusterState.UNAUTHORIZED, what="unauthorized")
    bogus.refresh_from_db()
    assert "401" in bogus.last_error
    assert bogus.pk in syncer.syncs and not syncer.syncs[bogus.pk].watchers


def test_check_now_runs_discovery_again(cm_a: CmCluster, syncer: Syncer) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    first = sync_until(syncer, lambda: Cluster.objects.get(pk=prod.pk).checked_at)
    Cluster.objects.filter(pk=prod.pk).update(checked_at=None, api_versions=[])  # "Check now"
    again = sync_until(syncer, lambda: Cluster.objects.get(pk=prod.pk).checked_at)
    assert again > first
    assert Cluster.objects.get(pk=prod.pk).api_versions == EVERYTHING


def test_two_workers_never_sync_one_cluster(cm_a: CmCluster, namespace: str) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    one, two = Syncer(owner="worker-1"), Syncer(owner="worker-2")
    try:
        sync_until(one, lambda: prod.pk in one.syncs and one.syncs[prod.pk].watchers)
        for _ in range(5):
            two.run()
            one.run()
        assert prod.pk not in two.syncs
        assert Cluster.objects.get(pk=prod.pk).sync_owner == "worker-1"
        # worker-1 dies (no release): worker-2 takes over when the lease runs out.
        lease_until = Cluster.objects.get(pk=prod.pk).sync_lease_until
        one.stop(release=False)
        sync_until(two, lambda: prod.pk in two.syncs, sync.LEASE.total_seconds() + 10)
        took = Cluster.objects.get(pk=prod.pk)
        assert took.sync_owner == "worker-2"
        assert lease_until is not None and took.sync_lease_until is not None
        assert took.sync_lease_until > lease_until  # not before the dead one's lease ran out
        cm_a.objects().create(cm.certificate("late", namespace))
        sync_until(two, lambda: row(prod, "Certificate", namespace, "late"), what="by worker-2")
        # worker-1 comes back: it does not get the cluster while worker-2 renews.
        for _ in range(3):
            one.run()
            two.run()
        assert prod.pk not in one.syncs
        # worker-2 stops cleanly: the lease is released at once, worker-1 takes it.
        two.stop()
        assert Cluster.objects.get(pk=prod.pk).sync_owner == ""
        one.run()
        assert prod.pk in one.syncs
    finally:
        one.stop()
        two.stop()


def test_removed_cluster_stops_its_watchers(cm_a: CmCluster, syncer: Syncer) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    sync_until(syncer, lambda: prod.pk in syncer.syncs and syncer.syncs[prod.pk].watchers)
    watchers = list(syncer.syncs[prod.pk].watchers.values())
    prod.delete()
    started = time.monotonic()
    syncer.run()
    assert not syncer.syncs
    assert time.monotonic() - started < 1  # the step does not wait for the threads
    wait_for(lambda: all(not w.alive for w in watchers), 5, "watchers ended")


def test_change_to_row_latency(cm_a: CmCluster, namespace: str, syncer: Syncer) -> None:
    """Time from a change in the cluster to its row, the step run when woken (as the
    worker runs an urgent step)."""
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    a = cm_a.objects()
    obj = a.create(cm.certificate("timed", namespace))
    sync_until(syncer, lambda: row(prod, "Certificate", namespace, "timed"))
    delays = []
    for i in range(20):
        sync.changed.clear()
        start = time.monotonic()
        obj = a.set_status(obj, cm.failed_status(i + 1, cm.now()))
        version = obj["metadata"]["resourceVersion"]
        while True:
            sync.changed.wait(5)
            sync.changed.clear()
            syncer.run()
            r = row(prod, "Certificate", namespace, "timed")
            if r is not None and r.resource_version == version:
                break
            assert time.monotonic() - start < 10, "change not mirrored within 10 s"
        delays.append(time.monotonic() - start)
        assert r.failed_attempts == i + 1
    delays.sort()
    print(f"\nchange -> row: median {delays[10] * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms")
    assert delays[10] < 2.0


def test_new_kubeconfig_and_backoff_settings_take_effect(
    cm_a: CmCluster, namespace: str, syncer: Syncer
) -> None:
    prod = add_cluster("prod", cm_a.kubeconfig_for("expired-token-" + "0" * 18))
    sync_until(syncer, lambda: state(prod) == ClusterState.UNAUTHORIZED, what="unauthorized")
    failed_at = cm.now() - timedelta(minutes=5)
    cm_a.objects().create(cm.certificate("web", namespace), cm.failed_status(3, failed_at))
    # The operator pastes a working kubeconfig: the sync starts again with it.
    prod.kubeconfig = cm_a.console_kubeconfig
    prod.save()
    cert = sync_until(syncer, lambda: row(prod, "Certificate", namespace, "web"), what="mirrored")
    assert state(prod) == ClusterState.CONNECTED
    assert cert.next_retry_at == failed_at + timedelta(hours=4)
    # cert-manager runs with --min/max backoff changed: the page saves new settings and the
    # sync computes every retry again.
    prod.refresh_from_db()
    prod.min_backoff_seconds, prod.max_backoff_seconds = 300, 900
    prod.save(update_fields=["min_backoff_seconds", "max_backoff_seconds"])
    sync_until(
        syncer,
        lambda: row_if(
            prod,
            "Certificate",
            namespace,
            "web",
            lambda r: r.next_retry_at == failed_at + timedelta(seconds=900),
        ),
        what="retry recomputed (5 min x 4, at most 15 min)",
    )
