"""Namespace-scoped roles from the cluster to the API and back: two real kube-apiservers,
the real mirror, a user who operates prod/<namespace> only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from issuance.kubernetes.certmanager import writeback
from issuance.kubernetes.certmanager.sync import Syncer
from issuance.models import ClusterResource
from tests.clusters import cm
from tests.clusters.conftest import CmCluster
from tests.clusters.syncing import running_syncer, sync_until
from tests.clusters.writeback_helpers import condition
from tests.factories import make_cluster, scoped_user

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


@pytest.fixture
def syncer() -> Iterator[Syncer]:
    yield from running_syncer()


def test_a_scoped_operator_sees_and_renews_only_their_namespace(
    cm_a: CmCluster, cm_b: CmCluster, namespace: str, syncer: Syncer
) -> None:
    other = f"{namespace}-b"
    cm_a.objects().ensure_namespace(other)
    failed = cm.failed_status(1, cm.now())
    for where, ns in ((cm_a, namespace), (cm_a, other), (cm_b, namespace)):
        where.objects().create(cm.certificate("web", ns), status=failed)
    prod = make_cluster("prod", cm_a.console_kubeconfig)
    staging = make_cluster("staging", cm_b.console_kubeconfig)
    mine = (prod.name, namespace)

    def all_mirrored() -> bool:
        names = ClusterResource.objects.filter(kind="Certificate", name="web").values_list(
            "cluster__name", "namespace"
        )
        return {(prod.name, namespace), (prod.name, other), (staging.name, namespace)} <= set(names)

    sync_until(syncer, all_mirrored, 60, "the three Certificates mirrored")

    api = APIClient()
    api.force_authenticate(user=scoped_user("team-op", "operator", (prod, namespace)))
    listed = api.get("/api/v1/clusters/-/certificates/").json()
    seen = {(c["cluster"], c["namespace"]) for c in listed["results"]}
    assert seen == {mine}
    assert api.get(f"/api/v1/clusters/prod/namespaces/{other}/certificates/web/").status_code == 404
    assert (
        api.get(f"/api/v1/clusters/staging/namespaces/{namespace}/certificates/web/").status_code
        == 404
    )
    assert api.get("/api/v1/certificates/").status_code == 403  # the console's own

    refused = [
        api.post(f"/api/v1/clusters/prod/namespaces/{other}/certificates/web/renew/"),
        api.post(f"/api/v1/clusters/staging/namespaces/{namespace}/certificates/web/renew/"),
    ]
    assert [r.status_code for r in refused] == [404, 404]
    queued = api.post(f"/api/v1/clusters/prod/namespaces/{namespace}/certificates/web/renew/")
    assert queued.status_code == 202
    writeback.run_due(prod)
    writeback.run_due(staging)

    # Read back from the clusters: only the scoped namespace's Certificate was touched.
    (issuing,) = condition(cm_a.objects().get("Certificate", namespace, "web"), "Issuing")
    assert (issuing["status"], issuing["reason"]) == ("True", "ManuallyTriggered")
    assert "by team-op" in issuing["message"]
    for where, ns in ((cm_a, other), (cm_b, namespace)):
        (left,) = condition(where.objects().get("Certificate", ns, "web"), "Issuing")
        assert left["status"] == "False", (where.server.url, ns)
