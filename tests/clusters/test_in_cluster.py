"""In-cluster mode against a real kube-apiserver: `cluster add NAME --in-cluster` with a real
ServiceAccount token, and the RBAC of deploy/kubernetes/overlays/cluster-mode applied for real.

How the token is had: the suite's apiserver (v1.20) runs without a controller-manager, so
the legacy token controller never fills a `kubernetes.io/service-account-token` Secret; the
TokenRequest API (`POST .../serviceaccounts/NAME/token`, what the kubelet itself calls for a
projected token) works because the apiserver has a signing key and an issuer. The token
files are laid out as the kubelet lays out a projected volume (`token -> ..data/token`,
`..data -> ..<timestamp>/`), and rotated as it rotates them: a new timestamped directory and
an atomic rename of `..data`.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from kubernetes import client as k8s

from issuance.kubernetes.certmanager import cluster_actions, kinds, kubeconfig, writeback
from issuance.kubernetes.certmanager.sync import Syncer
from issuance.models import Cluster, ClusterActionState, Event
from issuance.models.cluster import ClusterState
from tests.clusters import cm
from tests.clusters.conftest import CmCluster
from tests.clusters.syncing import row, row_if, running_syncer, sync_until
from tests.clusters.test_kubernetes_manifests import NAMESPACE, kubectl, render
from tests.clusters.writeback_helpers import condition
from tests.factories import scoped_user as user

pytestmark = [pytest.mark.kube, pytest.mark.django_db]

LIMITED_SA = "issuance-console-limited"


@pytest.fixture
def syncer() -> Iterator[Syncer]:
    yield from running_syncer()


@pytest.fixture(autouse=True)
def _forget_clients() -> Iterator[None]:
    kubeconfig.forget()
    yield
    kubeconfig.forget()


def install_service_accounts(cluster: CmCluster) -> None:
    """The cluster-mode overlay's ServiceAccount and RBAC, applied for real; and a second
    ServiceAccount bound only to the suite's `limited-viewer` role (get/list/watch
    certificates)."""
    cluster.objects().ensure_namespace(NAMESPACE)
    wanted = [
        o
        for o in render("cluster-mode")
        if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
    ]
    wanted += [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": LIMITED_SA}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": LIMITED_SA},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "limited-viewer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": LIMITED_SA, "namespace": NAMESPACE}],
        },
    ]
    admin = ["--kubeconfig", str(cluster.server.kubeconfig), "-n", NAMESPACE]
    result = subprocess.run(
        [kubectl(), *admin, "apply", "-f", "-"],
        input=yaml.safe_dump_all(wanted),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def token_for(cluster: CmCluster, service_account: str) -> str:
    """A token from the TokenRequest API, valid for an hour (as a projected token)."""
    core: Any = k8s.CoreV1Api(cluster.admin_api())
    made = core.create_namespaced_service_account_token(
        service_account,
        NAMESPACE,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token: str = made.status.token
    assert token.count(".") == 2  # a signed JWT
    return token


class ProjectedVolume:
    """A directory laid out as the kubelet lays out the ServiceAccount volume."""

    def __init__(self, root: Path, ca: bytes) -> None:
        self.root, self.ca = root, ca
        root.mkdir()
        for name in ("token", "ca.crt", "namespace"):
            (root / name).symlink_to(Path("..data") / name)

    def write(self, token: str) -> None:
        stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{uuid.uuid4().hex[:8]}"
        payload = self.root / stamp
        payload.mkdir()
        (payload / "token").write_text(token)
        (payload / "ca.crt").write_bytes(self.ca)
        (payload / "namespace").write_text(NAMESPACE)
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(stamp)
        os.replace(tmp, self.root / "..data")  # the atomic swap


@pytest.fixture
def in_pod(
    cm_a: CmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ProjectedVolume]:
    """This process as if it ran in a pod of the cluster (the environment a pod gets)."""
    install_service_accounts(cm_a)
    volume = ProjectedVolume(tmp_path / "serviceaccount", cm_a.server.ca_path.read_bytes())
    monkeypatch.setenv("KUBE_SERVICEACCOUNT_DIR", str(volume.root))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(cm_a.server.port))
    yield volume


def add_in_cluster(name: str = "local") -> Cluster:
    out = StringIO()
    call_command("cluster", "add", name, "--in-cluster", "--as", "alice", stdout=out)
    assert f"Cluster {name} added" in out.getvalue()
    return Cluster.objects.get(name=name)


def check(name: str = "local") -> str:
    out = StringIO()
    call_command("cluster", "check", name, stdout=out)
    return out.getvalue()


def test_mirror_renew_and_approve_as_the_service_account(
    cm_a: CmCluster, in_pod: ProjectedVolume, namespace: str, syncer: Syncer
) -> None:
    token = token_for(cm_a, "issuance-console")
    in_pod.write(token)
    local = add_in_cluster()
    assert local.in_cluster and local.kubeconfig_ciphertext == ""
    added = Event.objects.get(kind="Cluster", name="local", reason="ClusterAdded")
    assert f"in-cluster as ServiceAccount of namespace {NAMESPACE}" in added.message
    assert token not in added.message

    a = cm_a.objects()
    a.create(cm.certificate("web", namespace), status=cm.failed_status(2, cm.now()))
    a.create(cm.certificate_request("web-1", namespace, "web"))
    cert = sync_until(syncer, lambda: row(local, "Certificate", namespace, "web"), what="mirror")
    req = sync_until(
        syncer, lambda: row(local, "CertificateRequest", namespace, "web-1"), what="mirror"
    )
    sync_until(
        syncer, lambda: Cluster.objects.get(pk=local.pk).checked_at, what="discovery + review"
    )
    local.refresh_from_db()
    assert local.state == ClusterState.CONNECTED, local.last_error
    assert local.missing_permissions == []

    renew = cluster_actions.request_renew(cert, user("bob", "operator"))
    approve = cluster_actions.request_decision(req, user("carol", "approver"), "Approved")
    writeback.run_due(local)
    for action in (renew, approve):
        action.refresh_from_db()
        assert action.state == ClusterActionState.DONE, action.last_error
    (issuing,) = condition(a.get("Certificate", namespace, "web"), "Issuing")
    assert issuing["status"] == "True" and "by bob in Issuance Console" in issuing["message"]
    (approved,) = condition(a.get("CertificateRequest", namespace, "web-1"), "Approved")
    assert approved["status"] == "True" and "approved by carol" in approved["message"]
    # And the mirror sees its own writes come back through the watch.
    sync_until(
        syncer,
        lambda: row_if(local, "CertificateRequest", namespace, "web-1", lambda r: r.state),
        what="approval mirrored",
    )


def test_missing_permissions_are_reported_and_a_rotated_token_is_used(
    cm_a: CmCluster, in_pod: ProjectedVolume, namespace: str, syncer: Syncer
) -> None:
    in_pod.write(token_for(cm_a, LIMITED_SA))
    local = add_in_cluster()
    cm_a.objects().create(cm.certificate("seen", namespace))
    sync_until(syncer, lambda: row(local, "Certificate", namespace, "seen"), what="mirrored")
    sync_until(syncer, lambda: Cluster.objects.get(pk=local.pk).checked_at, what="checked")
    local.refresh_from_db()
    # As for a kubeconfig cluster with the same role (test_sync.py): what it lacks, listed.
    granted = {f"{verb} certificates.cert-manager.io" for verb in ("get", "list", "watch")}
    assert local.missing_permissions == [
        str(a) for a in kinds.required_access() if str(a) not in granted
    ]
    assert local.state == ClusterState.CONNECTED
    client_before = kubeconfig.api_client_for(local)

    # The kubelet rotates the token (here: to the fully bound ServiceAccount's, so the change
    # shows), and the old one stops working (its ServiceAccount is deleted).
    in_pod.write(token_for(cm_a, "issuance-console"))
    core: Any = k8s.CoreV1Api(cm_a.admin_api())
    core.delete_namespaced_service_account(LIMITED_SA, NAMESPACE)
    out = check()
    assert "Cluster local: Connected" in out and "missing permissions: none" in out, out
    local.refresh_from_db()
    assert local.missing_permissions == [] and local.state == ClusterState.CONNECTED
    # The same client (the sync's too), not one rebuilt: its token hook read the new file.
    assert kubeconfig.api_client_for(local) is client_before


def test_add_in_cluster_outside_a_pod_is_refused_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(CommandError, match=r"^in-cluster: KUBERNETES_SERVICE_HOST"):
        add_in_cluster()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBE_SERVICEACCOUNT_DIR", str(tmp_path))
    with pytest.raises(CommandError, match=f"^in-cluster: cannot read .* at {tmp_path}/token"):
        add_in_cluster()
    with pytest.raises(CommandError, match=r"^context: an in-cluster cluster has no"):
        call_command("cluster", "add", "local", "--in-cluster", "--context", "x")
    with pytest.raises(CommandError, match="--kubeconfig"):  # one source, not both
        call_command("cluster", "add", "local", "--in-cluster", "--kubeconfig", "f")
    assert not Cluster.objects.exists()
    assert not Event.objects.filter(reason="ClusterAdded").exists()
