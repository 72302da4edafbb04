"""deploy/kubernetes/: rendered with `kubectl kustomize` and dry-run on a real kube-apiserver.

`kubectl apply --dry-run=server` sends every object through the API server's decoding,
defaulting, validation and admission (RBAC escalation checks included) without storing it.
The apiserver the suite runs is v1.20, which does not serve `policy/v1`
PodDisruptionBudget (added in v1.21); see test_the_pod_disruption_budget_is_a_valid_policy_v1_object
for how that object is checked instead.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.clusters.conftest import RBAC_FILE, CmCluster

ROOT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
OVERLAYS = ("single-namespace", "cluster-mode")
NAMESPACE = "issuance-console"

Obj = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path is not None, "kubectl is missing: `make system-packages` installs Debian's"
    return path


def render(overlay: str) -> list[Obj]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(ROOT / "overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def by_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def apply_dry_run(cluster: CmCluster, objects: list[Obj]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            kubectl(),
            "--kubeconfig",
            str(cluster.server.kubeconfig),
            "apply",
            "--dry-run=server",
            "-o",
            "name",
            "-f",
            "-",
        ],
        input=yaml.safe_dump_all(objects),
        check=False,  # the tests read the refusals too
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_what_a_restricted_namespace_admits(overlay: str) -> None:
    objects = render(overlay)
    kinds = sorted(o["kind"] for o in objects)
    for kind in ("ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"):
        assert kind in kinds, (overlay, kinds)
    assert all(
        o["metadata"].get("namespace") == NAMESPACE
        for o in objects
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding")
    )
    assert "Secret" not in kinds  # the operator's own, never in the repository
    deployments = {d["metadata"]["name"]: d for d in by_kind(objects, "Deployment")}
    assert set(deployments) == {"issuance-console-web", "issuance-console-worker"}
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "issuance-console"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        assert container["image"].startswith("issuance-console")
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}
        assert {"configMapRef": {"name": "issuance-console"}} in container["envFrom"]
        assert {"secretRef": {"name": "issuance-console"}} in container["envFrom"]
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]
        # Only cluster mode holds a credential for the cluster it runs in.
        assert pod.get("automountServiceAccountToken", False) is (overlay == "cluster-mode")
    web = deployments["issuance-console-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["args"][:2] == ["serve", "--no-worker"]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    worker = deployments["issuance-console-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"] == ["reconcile"]
    assert worker["livenessProbe"]["exec"]["command"] == [
        "issuance-console",
        "reconcile",
        "--check",
    ]
    (service,) = by_kind(objects, "Service")
    assert (
        service["spec"]["selector"]
        == (deployments["issuance-console-web"]["spec"]["selector"]["matchLabels"])
    )


def test_cluster_mode_grants_the_documented_role_to_the_service_account() -> None:
    objects = render("cluster-mode")
    (role,) = by_kind(objects, "ClusterRole")
    documented = next(
        o for o in yaml.safe_load_all(RBAC_FILE.read_text()) if o["kind"] == "ClusterRole"
    )
    assert role["metadata"]["name"] == documented["metadata"]["name"]
    assert role["rules"] == documented["rules"]  # the copy has not drifted
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "issuance-console", "namespace": NAMESPACE}
    ]
    assert by_kind(render("single-namespace"), "ClusterRole") == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_server_accepts_every_object(cm_a: CmCluster, overlay: str) -> None:
    """Everything but the PodDisruptionBudget (below), dry-run on the real kube-apiserver."""
    cm_a.objects().ensure_namespace(NAMESPACE)
    objects = [o for o in render(overlay) if o["kind"] != "PodDisruptionBudget"]
    result = apply_dry_run(cm_a, objects)
    assert result.returncode == 0, result.stderr
    names = set(result.stdout.split())
    assert "deployment.apps/issuance-console-web" in names
    assert "deployment.apps/issuance-console-worker" in names
    assert len(names) == len(objects), result.stdout
    # A dry run stores nothing.
    status, _ = cm_a.server.get(
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/issuance-console-web"
    )
    assert status == 404


def test_the_api_server_refuses_a_broken_object(cm_a: CmCluster) -> None:
    """The dry run above is a real check: a Deployment whose selector misses its pods' labels
    is refused."""
    cm_a.objects().ensure_namespace(NAMESPACE)
    objects = render("single-namespace")
    (web,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith("-web")]
    web["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "nothing"
    result = apply_dry_run(cm_a, [web])
    assert result.returncode != 0
    assert "selector" in result.stderr


# PodDisruptionBudget fields of policy/v1 (Kubernetes API reference, "PodDisruptionBudget v1
# policy"): spec.minAvailable and spec.maxUnavailable (int or percentage string, at most one),
# spec.selector (LabelSelector), spec.unhealthyPodEvictionPolicy (IfHealthyBudget or
# AlwaysAllow, v1.26+). policy/v1beta1 has the same first three, with one difference in
# meaning: there an empty selector selects no pod, in policy/v1 every pod of the namespace.
PDB_V1_SPEC_FIELDS = {"minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy"}
LABEL_SELECTOR_FIELDS = {"matchLabels", "matchExpressions"}


def test_the_pod_disruption_budget_is_a_valid_policy_v1_object(cm_a: CmCluster) -> None:
    """v1.20 serves PodDisruptionBudget as policy/v1beta1 only. The object is checked in two
    steps instead: (1) against the policy/v1 shape above, written from the Kubernetes API
    reference (known fields only, one of minAvailable/maxUnavailable, a non-empty selector
    that matches the web pods — so the v1/v1beta1 difference for empty selectors cannot
    apply); (2) converted to policy/v1beta1 by changing apiVersion alone (valid because of
    (1): no field v1beta1 lacks, no empty selector) and dry-run on the real API server,
    which validates the values (e.g. minAvailable's int-or-percent) and the selector."""
    objects = render("cluster-mode")
    (pdb,) = by_kind(objects, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    spec = pdb["spec"]
    assert set(spec) <= PDB_V1_SPEC_FIELDS, set(spec) - PDB_V1_SPEC_FIELDS
    assert ("minAvailable" in spec) != ("maxUnavailable" in spec)
    assert "unhealthyPodEvictionPolicy" not in spec  # v1.26+: v1beta1 has no such field
    selector = spec["selector"]
    assert set(selector) <= LABEL_SELECTOR_FIELDS and selector.get("matchLabels")
    (web,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith("-web")]
    pod_labels = web["spec"]["template"]["metadata"]["labels"]
    assert selector["matchLabels"].items() <= pod_labels.items()
    assert web["spec"]["replicas"] > spec["minAvailable"]  # a drain can still evict one

    cm_a.objects().ensure_namespace(NAMESPACE)
    served = apply_dry_run(cm_a, [pdb])
    assert served.returncode != 0  # what this test works around: v1 is not served here
    assert "policy/v1" in served.stderr
    converted = {**pdb, "apiVersion": "policy/v1beta1"}
    result = apply_dry_run(cm_a, [converted])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["poddisruptionbudget.policy/issuance-console-web"]
    bad = {**converted, "spec": {**spec, "minAvailable": "one"}}
    refused = apply_dry_run(cm_a, [bad])
    assert refused.returncode != 0
    assert "minAvailable" in refused.stderr
