"""`manage.py cluster add|list|check|remove`."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from issuance.models import Cluster, ClusterResource, Event
from issuance.models.cluster import ClusterState
from tests.clusters.conftest import CmCluster
from tests.factories import make_cluster as add_cluster

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-token-" + "x" * 24
KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:1"}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
contexts:
- {{name: main, context: {{cluster: c, user: u}}}}
- {{name: other, context: {{cluster: c, user: u}}}}
current-context: main
"""


def run(*args: str) -> str:
    out = StringIO()
    call_command("cluster", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def kubeconfig_file(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return path


def test_add_stores_the_kubeconfig_encrypted_and_audits(kubeconfig_file: Path) -> None:
    out = run(
        "add",
        "prod",
        "--kubeconfig",
        str(kubeconfig_file),
        "--context",
        "other",
        "--min-backoff",
        "10m",
        "--max-backoff",
        "2h",
        "--as",
        "alice",
    )
    assert "Cluster prod added" in out and TOKEN not in out
    cluster = Cluster.objects.get(name="prod")
    assert TOKEN not in cluster.kubeconfig_ciphertext
    assert cluster.kubeconfig == KUBECONFIG
    assert (cluster.context, cluster.min_backoff_seconds, cluster.max_backoff_seconds) == (
        "other",
        600,
        7200,
    )
    assert (cluster.state, cluster.created_by) == (ClusterState.PENDING, "alice")
    event = Event.objects.get(kind="Cluster", name="prod", reason="ClusterAdded")
    assert event.actor == "alice" and TOKEN not in event.message
    assert "10m0s to 2h0m0s" in event.message
    run("add", "staging", "--kubeconfig", str(kubeconfig_file))  # the defaults
    staging = Cluster.objects.get(name="staging")
    assert (staging.context, staging.min_backoff_seconds, staging.max_backoff_seconds) == (
        "",
        3600,
        115200,
    )


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--context", "nope"], "context: no context 'nope'"),
        (["--min-backoff", "soon"], "min-backoff: invalid duration"),
        (["--min-backoff", "2h", "--max-backoff", "1h"], "max-backoff: must not be shorter"),
    ],
)
def test_bad_options_refused_naming_the_field(
    kubeconfig_file: Path, args: list[str], field: str
) -> None:
    with pytest.raises(CommandError, match=field):
        run("add", "prod", "--kubeconfig", str(kubeconfig_file), *args)
    assert not Cluster.objects.exists() and not Event.objects.filter(kind="Cluster").exists()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("clusters: [", "kubeconfig: not valid YAML"),
        ("apiVersion: v1\nkind: Config\n", "kubeconfig: not a kubeconfig"),
        (KUBECONFIG.replace("current-context: main\n", ""), "context: the kubeconfig has no"),
        (KUBECONFIG.replace("token: ", "client-certificate-data: "), "kubeconfig: cannot be used"),
    ],
)
def test_bad_kubeconfig_refused_naming_the_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(CommandError, match=error):
        run("add", "prod", "--kubeconfig", str(path))
    assert not Cluster.objects.exists()


def test_name_and_file_errors(kubeconfig_file: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="kubeconfig: cannot read"):
        run("add", "prod", "--kubeconfig", str(tmp_path / "missing"))
    with pytest.raises(CommandError, match="name: use at most 63 lowercase"):
        run("add", "Prod_1", "--kubeconfig", str(kubeconfig_file))
    run("add", "prod", "--kubeconfig", str(kubeconfig_file))
    with pytest.raises(CommandError, match="name: a cluster named 'prod' exists"):
        run("add", "prod", "--kubeconfig", str(kubeconfig_file))
    assert Cluster.objects.count() == 1


def test_list_and_remove(kubeconfig_file: Path) -> None:
    assert "No clusters" in run("list")
    run("add", "prod", "--kubeconfig", str(kubeconfig_file))
    prod = Cluster.objects.get(name="prod")
    prod.api_versions = ["cert-manager.io/v1"]
    prod.missing_permissions = ["approve signers.cert-manager.io"]
    prod.save()
    ClusterResource.objects.create(cluster=prod, kind="Certificate", name="web", uid="u1")
    listed = run("list").splitlines()
    assert listed[0].split() == [
        "NAME",
        "STATE",
        "LAST",
        "SYNC",
        "API",
        "VERSIONS",
        "MISSING",
        "PERMISSIONS",
    ]
    assert listed[1].split() == ["prod", "Pending", "never", "cert-manager.io/v1", "1"]
    assert "removed" in run("remove", "prod", "--as", "bob")
    assert not Cluster.objects.exists() and not ClusterResource.objects.exists()
    event = Event.objects.get(kind="Cluster", name="prod", reason="ClusterRemoved")
    assert event.actor == "bob" and "1 mirrored objects" in event.message
    with pytest.raises(CommandError, match="name: no cluster named 'prod'"):
        run("remove", "prod")


@pytest.mark.kube
def test_check_prints_versions_and_missing_permissions(cm_a: CmCluster) -> None:
    add_cluster("limited", cm_a.limited_kubeconfig)
    add_cluster("full", cm_a.console_kubeconfig)
    out = run("check", "limited")
    assert "Cluster limited: Connected" in out
    assert "API versions: cert-manager.io/v1, acme.cert-manager.io/v1" in out
    assert "    approve signers.cert-manager.io" in out
    assert "list certificates.cert-manager.io" not in out
    limited = Cluster.objects.get(name="limited")
    assert "watch orders.acme.cert-manager.io" in limited.missing_permissions
    assert limited.checked_at is not None
    out = run("check", "full")
    assert "missing permissions: none" in out
    assert Cluster.objects.get(name="full").missing_permissions == []
    # The kubeconfig is what the cluster sees: a wrong token reads Unauthorized.
    add_cluster("bogus", cm_a.kubeconfig_for("no-such-token-" + "0" * 18))
    assert "Cluster bogus: Unauthorized" in run("check", "bogus")


def test_a_kubeconfig_given_to_an_in_cluster_cluster_is_what_it_uses() -> None:
    """In-cluster mode is one of two sources: replacing the kubeconfig (edit form, API)
    leaves it (tests/clusters/test_in_cluster.py covers the in-cluster source itself)."""
    cluster = Cluster.objects.create(name="local", in_cluster=True)
    assert cluster.kubeconfig == ""
    cluster.kubeconfig = KUBECONFIG
    cluster.save(update_fields=["kubeconfig_ciphertext", "in_cluster"])
    cluster.refresh_from_db()
    assert not cluster.in_cluster and cluster.kubeconfig == KUBECONFIG
