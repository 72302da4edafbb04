"""Two real kube-apiservers with cert-manager's CRDs (tests/clusters/crds.py), for cluster mode.

Session-scoped: both start together (about as long as one). Each has three users:
- admin (system:masters): the tests' own hand, creating objects as cert-manager would;
- issuance-console: bound to docs/rbac/issuance-console.yaml, exactly what docs/clusters/index.md says
  to grant; the kubeconfig a test adds as a Cluster;
- limited: only get/list/watch on certificates, for the missing-permissions report.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as kconfig
from kubernetes import utils as kutils

from tests.clusters.cm import CertManagerObjects
from tests.clusters.crds import all_crds
from tests.helpers import wait_for
from tests.kube.cluster import (
    Cluster,
    apiserver_binary,
    etcd_binary,
    start_cluster,
    write_kubeconfig,
)

RBAC_FILE = Path(__file__).resolve().parents[2] / "docs" / "rbac" / "issuance-console.yaml"
CONSOLE_USER = "issuance-console"
LIMITED_USER = "limited-viewer"


@dataclass
class CmCluster:
    """A kube-apiserver with cert-manager's CRDs, and kubeconfigs for its users."""

    server: Cluster
    console_token: str
    limited_token: str

    @property
    def admin_kubeconfig(self) -> str:
        return self.server.kubeconfig.read_text()

    def kubeconfig_for(self, token: str) -> str:
        path = self.server.workdir / f"kubeconfig-{token[:8]}"
        write_kubeconfig(path, self.server.url, self.server.ca_path.read_bytes(), token)
        return path.read_text()

    @property
    def console_kubeconfig(self) -> str:
        return self.kubeconfig_for(self.console_token)

    @property
    def limited_kubeconfig(self) -> str:
        return self.kubeconfig_for(self.limited_token)

    def admin_api(self) -> k8s.ApiClient:
        cfg = k8s.Configuration()
        kconfig.load_kube_config(config_file=str(self.server.kubeconfig), client_configuration=cfg)
        return k8s.ApiClient(cfg)

    def objects(self) -> CertManagerObjects:
        return CertManagerObjects(self.admin_api())


def _install(server: Cluster) -> None:
    cfg = k8s.Configuration()
    kconfig.load_kube_config(config_file=str(server.kubeconfig), client_configuration=cfg)
    api = k8s.ApiClient(cfg)
    ext: Any = k8s.ApiextensionsV1Api(api)
    for body in all_crds():
        ext.create_custom_resource_definition(body)
    create_from_yaml: Any = kutils.create_from_yaml  # untyped in the client
    create_from_yaml(api, yaml_objects=list(yaml.safe_load_all(RBAC_FILE.read_text())))
    rbac: Any = k8s.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role(
        {
            "metadata": {"name": "limited-viewer"},
            "rules": [
                {
                    "apiGroups": ["cert-manager.io"],
                    "resources": ["certificates"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "limited-viewer"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "limited-viewer",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": LIMITED_USER}
            ],
        }
    )

    def established() -> bool:
        names = {
            c.metadata.name
            for c in ext.list_custom_resource_definition().items
            if any(
                cond.type == "Established" and cond.status == "True"
                for cond in (c.status.conditions or [])
            )
        }
        return {b["metadata"]["name"] for b in all_crds()} <= names

    wait_for(established, 60, "cert-manager CRDs established")


def _start(workdir: Path) -> CmCluster:
    console_token, limited_token = secrets.token_hex(16), secrets.token_hex(16)
    server = start_cluster(
        workdir,
        extra_tokens={
            console_token: (CONSOLE_USER, ["system:authenticated"]),
            limited_token: (LIMITED_USER, ["system:authenticated"]),
        },
    )
    try:
        _install(server)
    except Exception:
        server.stop()
        raise
    return CmCluster(server, console_token, limited_token)


@pytest.fixture(scope="session")
def cm_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CmCluster, CmCluster]]:
    """Two clusters ("prod" and "staging" in the tests), started at the same time."""
    if apiserver_binary() is None or etcd_binary() is None:
        pytest.skip("kube-apiserver/etcd missing: run `make kube-apiserver`")
    dirs = [Path(tmp_path_factory.mktemp(f"cm-{i}")) for i in (1, 2)]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(_start, d) for d in dirs]
        started: list[CmCluster] = []
        error: BaseException | None = None
        for future in futures:
            try:
                started.append(future.result())
            except BaseException as exc:  # stop the other one, then fail
                error = exc
    if error is not None:
        for c in started:
            c.server.stop()
        raise error
    try:
        yield started[0], started[1]
    finally:
        for c in started:
            c.server.stop()


@pytest.fixture
def cm_a(cm_clusters: tuple[CmCluster, CmCluster]) -> CmCluster:
    return cm_clusters[0]


@pytest.fixture
def cm_b(cm_clusters: tuple[CmCluster, CmCluster]) -> CmCluster:
    return cm_clusters[1]


@pytest.fixture
def namespace(cm_clusters: tuple[CmCluster, CmCluster]) -> str:
    """A namespace unique to the test, made in both clusters (objects of earlier tests stay
    in their own namespaces)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    for c in cm_clusters:
        c.objects().ensure_namespace(name)
    return name
