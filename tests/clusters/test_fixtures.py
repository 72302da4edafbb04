"""The test clusters themselves: cert-manager's CRDs are served and store objects with status.

The kube-apiserver v1.20.2 built from Debian's source used to die (SIGSEGV in reflect2) on
the first custom resource it stored; scripts/build-kube-apiserver.sh swaps in Debian's
reflect2 1.0.2. These tests would fail first if that regressed.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from tests.clusters import cm
from tests.clusters.conftest import CmCluster

pytestmark = pytest.mark.kube


def test_both_clusters_store_cert_manager_objects_with_status(
    cm_clusters: tuple[CmCluster, CmCluster], namespace: str
) -> None:
    for c in cm_clusters:
        objects = c.objects()
        failed_at = cm.now()
        made = objects.create(
            cm.certificate("web", namespace, "web.example.com"),
            status=cm.failed_status(3, failed_at),
        )
        got = objects.get("Certificate", namespace, "web")
        assert got["metadata"]["uid"] == made["metadata"]["uid"]
        assert got["status"]["failedIssuanceAttempts"] == 3
        assert got["status"]["lastFailureTime"] == cm.ts(failed_at)
        assert got["spec"]["dnsNames"] == ["web.example.com"]
        assert c.server.apiserver.alive()  # still alive after storing a custom resource


def test_status_is_a_subresource_create_ignores_it(cm_a: CmCluster, namespace: str) -> None:
    objects = cm_a.objects()
    body = cm.certificate("status-ignored", namespace)
    body["status"] = {"failedIssuanceAttempts": 9}
    objects.create(body)
    stored = objects.get("Certificate", namespace, "status-ignored")
    assert (stored.get("status") or {}).get("failedIssuanceAttempts") is None


def test_the_two_clusters_are_separate(cm_a: CmCluster, cm_b: CmCluster, namespace: str) -> None:
    cm_a.objects().create(cm.certificate("only-in-a", namespace))
    with pytest.raises(k8s.ApiException) as err:
        cm_b.objects().get("Certificate", namespace, "only-in-a")
    assert err.value.status == 404
