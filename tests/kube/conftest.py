"""Fixtures for the Kubernetes connector tests: one real etcd + kube-apiserver per session."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s

from issuance.kubernetes.csr_connector import config, connector, csr_writeback
from issuance.kubernetes.csr_connector.connector import Connector
from issuance.kubernetes.csr_connector.csr_api import KubeApi
from tests.factories import csr_pem
from tests.helpers import wait_for
from tests.kube.cluster import Cluster, apiserver_binary, etcd_binary, start_cluster

T = TypeVar("T")

NODE_TOKEN = "node1-" + uuid.uuid4().hex
NODE_USER = "system:node:node-1"


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if apiserver_binary() is None or etcd_binary() is None:
        pytest.skip("kube-apiserver/etcd missing: run `make kube-apiserver`")
    workdir = Path(tmp_path_factory.mktemp("kube"))
    cluster = start_cluster(workdir, extra_tokens={NODE_TOKEN: (NODE_USER, ["system:nodes"])})
    try:
        admin = k8s.RbacAuthorizationV1Api(_api_client(cluster.kubeconfig))
        # What kubeadm sets up: nodes may create and read CSRs.
        admin.create_cluster_role_binding(
            {  # a plain dict: sent as JSON unchanged
                "metadata": {"name": "nodes-create-csrs"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:node-bootstrapper",
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": "system:nodes",
                    }
                ],
            }
        )
        yield cluster
    finally:
        cluster.stop()


def _api_client(kubeconfig: Path) -> k8s.ApiClient:
    from kubernetes import config as kconfig

    cfg = k8s.Configuration()
    kconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return k8s.ApiClient(cfg)


@pytest.fixture
def signer_name() -> str:
    """A signer unique to the test: CSRs of earlier tests (same etcd) are not mirrored."""
    return f"example.com/test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kube_env(
    kube_cluster: Cluster, monkeypatch: pytest.MonkeyPatch, signer_name: str
) -> Iterator[Cluster]:
    monkeypatch.setenv("KUBE_CONNECTOR", "1")
    monkeypatch.setenv("KUBECONFIG", str(kube_cluster.kubeconfig))
    monkeypatch.setenv("KUBE_SIGNER_NAMES", f"{signer_name}=kube-ca,other.example/x=missing")
    config.reset()
    yield kube_cluster
    csr_writeback.BEFORE_WRITE = None
    connector.shutdown()


@pytest.fixture
def kconn(kube_env: Cluster) -> Iterator[Connector]:
    """The connector the worker step uses, with short watches so tests see restarts fast."""
    conn = Connector(watch_seconds=5, wake=None)
    connector._connector["default"] = conn
    conn.start()
    yield conn
    conn.stop()


@pytest.fixture
def kapi(kube_env: Cluster) -> KubeApi:
    return KubeApi()


@pytest.fixture
def node_api(kube_env: Cluster) -> Any:
    """CertificatesV1Api as the node user (like a kubelet)."""
    cfg = k8s.Configuration()
    cfg.host = kube_env.url
    cfg.ssl_ca_cert = str(kube_env.ca_path)
    cfg.api_key = {"authorization": f"Bearer {NODE_TOKEN}"}
    return k8s.CertificatesV1Api(k8s.ApiClient(cfg))


def node_csr_pem(common_name: str, *dns_names: str, ip_addresses: Sequence[str] = ()) -> str:
    """A kubelet's CSR: organization system:nodes."""
    return csr_pem(
        *dns_names,
        common_name=common_name,
        ip_addresses=ip_addresses,
        organizations=["system:nodes"],
    )


def csr_body(name: str, signer: str, pem: str, usages: list[str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(pem.encode()).decode(),
            "signerName": signer,
            "usages": usages or ["digital signature", "key encipherment", "server auth"],
        },
    }


def sync_until(
    check: Callable[[], T | None],
    conn: Connector | None = None,
    timeout: float = 30,
    what: str = "",
) -> T:
    """Run connector passes until `check()` is truthy (no fixed sleeps for the outcome); its
    value."""

    def synced() -> T | None:
        if conn is not None:
            conn.sync()
        return check()

    return wait_for(synced, timeout, what or repr(check))
