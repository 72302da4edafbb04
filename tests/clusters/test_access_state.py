"""Cluster states a check finds that the two cert-manager clusters cannot show: a real
kube-apiserver without cert-manager's CRDs, and one that is not there at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from issuance.kubernetes.certmanager.sync import Syncer
from issuance.models import Cluster
from issuance.models.cluster import ClusterState
from tests.clusters.syncing import running_syncer, state, sync_until
from tests.e2e.servers import free_port
from tests.factories import make_cluster as add_cluster
from tests.kube.cluster import Cluster as KubeServer
from tests.kube.cluster import write_kubeconfig
from tests.kube.conftest import kube_cluster  # noqa: F401 - a kube-apiserver without CRDs

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


@pytest.fixture
def syncer() -> Iterator[Syncer]:
    yield from running_syncer()


def test_no_cert_manager(kube_cluster: KubeServer, syncer: Syncer) -> None:  # noqa: F811
    bare = add_cluster("bare", kube_cluster.kubeconfig.read_text())
    sync_until(syncer, lambda: state(bare) == ClusterState.NO_CERT_MANAGER, what="found none")
    bare.refresh_from_db()
    assert bare.api_versions == [] and "cert-manager.io" in bare.last_error
    assert bare.checked_at is not None
    assert not syncer.syncs[bare.pk].watchers  # nothing to watch


def test_unreachable_from_the_start(
    kube_cluster: KubeServer,  # noqa: F811
    syncer: Syncer,
    tmp_path: Path,
) -> None:
    path = tmp_path / "kc"
    nobody = f"https://127.0.0.1:{free_port()}"  # no server listens there
    write_kubeconfig(path, nobody, kube_cluster.ca_path.read_bytes(), "token")
    gone = add_cluster("gone", path.read_text())
    sync_until(syncer, lambda: state(gone) == ClusterState.UNREACHABLE, what="unreachable")
    gone.refresh_from_db()
    assert "Connection refused" in gone.last_error and gone.checked_at is not None
    assert Cluster.objects.get(pk=gone.pk).api_versions == []
