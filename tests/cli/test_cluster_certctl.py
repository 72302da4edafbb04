"""certctl on mirrored objects (CLUSTER/NAMESPACE/NAME): status, renew, approve, deny, with
the API's rules for who may act."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from issuance.models import Cluster, ClusterAction, Event
from tests.clusters.writeback_helpers import mirrored
from tests.factories import make_cluster as add_cluster
from tests.factories import scoped_user as user
from tests.web.mirror_builders import event

pytestmark = pytest.mark.django_db

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def run(*args: str) -> str:
    out = StringIO()
    call_command("certctl", *args, stdout=out)
    return out.getvalue()


def obj(kind: str, namespace: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{kind}-{name}"},
        "spec": {},
        "status": status,
    }


@pytest.fixture
def prod() -> Cluster:
    cluster = add_cluster("prod", KUBECONFIG)
    web = mirrored(cluster, obj("Certificate", "team-a", "web"))
    failed = timezone.now() - timedelta(minutes=10)
    web.failed_attempts, web.last_failure_time = 3, failed
    web.next_retry_at = failed + timedelta(hours=4)
    web.save()
    mirrored(cluster, obj("CertificateRequest", "team-a", "web-1"))
    mirrored(cluster, obj("Certificate", "team-b", "api"))
    event(cluster, web, "Failed", "The certificate request has failed to complete")
    return cluster


def test_status_shows_the_next_retry_and_the_timeline(prod: Cluster) -> None:
    out = run("status", "prod/team-a/web")
    assert "Certificate: prod/team-a/web" in out
    assert "Failed issuance attempts: 3" in out
    assert "Next retry:" in out and "computed as cert-manager does" in out
    assert "The certificate request has failed to complete" in out
    assert "CertificateRequest: prod/team-a/web-1" in run("status", "prod/team-a/web-1")
    with pytest.raises(CommandError, match="no Certificate or CertificateRequest"):
        run("status", "prod/team-a/nope")
    with pytest.raises(CommandError, match="CLUSTER/NAMESPACE/NAME"):
        run("status", "prod/a/b/c")


def test_renew_as_the_shell_user_queues_an_action(prod: Cluster) -> None:
    out = run("renew", "prod/team-a/web", "prod/team-b/api")
    assert out.count("queued (action") == 2
    actors = set(ClusterAction.objects.values_list("actor", flat=True))
    assert len(actors) == 1 and actors.pop().startswith("cli:")
    assert Event.objects.filter(reason="ManuallyTriggered", name="prod/team-a/web").exists()
    assert "renew by cli:" in run("status", "prod/team-a/web")


def test_renew_of_something_missing_queues_nothing(prod: Cluster) -> None:
    with pytest.raises(CommandError, match="no Certificate prod/team-a/nope"):
        run("renew", "prod/team-a/web", "prod/team-a/nope")
    assert not ClusterAction.objects.exists()


def test_as_user_is_checked_like_the_api(prod: Cluster) -> None:
    user("so", "operator", (prod, "team-a"))
    user("sa", "approver", (prod, "team-a"))
    with pytest.raises(CommandError, match="does not hold the operator role"):
        run("renew", "prod/team-b/api", "--as", "so")
    with pytest.raises(CommandError, match="does not hold the approver role"):
        run("approve", "prod/team-a/web-1", "--as", "so")
    with pytest.raises(CommandError, match="no active console user"):
        run("renew", "prod/team-a/web", "--as", "nobody")
    assert not ClusterAction.objects.exists()
    assert "Renewal of Certificate prod/team-a/web queued" in run(
        "renew", "prod/team-a/web", "--as", "so"
    )
    out = run("deny", "prod/team-a/web-1", "--reason", "WrongDomain", "--as", "sa")
    assert "Denial of CertificateRequest prod/team-a/web-1 queued" in out
    denial = ClusterAction.objects.get(action="deny")
    assert (denial.actor, denial.reason) == ("sa", "WrongDomain")
    with pytest.raises(CommandError, match="already has a decision queued"):
        run("approve", "prod/team-a/web-1", "--as", "sa")
