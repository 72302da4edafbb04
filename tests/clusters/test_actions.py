"""Queuing renew/approve/deny for mirrored objects: roles, scopes, cmctl's refusals, audit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from issuance.kubernetes.certmanager import cluster_actions
from issuance.models import Cluster, ClusterAction, ClusterResource, Event
from issuance.operations.actions import ActionError
from issuance.worker.wakeup import local_wakeup
from tests.clusters.writeback_helpers import mirrored
from tests.factories import make_cluster as add_cluster
from tests.factories import scoped_user as user

pytestmark = pytest.mark.django_db(transaction=True)  # on_commit wake-ups run

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def obj(kind: str, namespace: str, name: str, status: dict[str, Any] | None = None) -> Any:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {},
        "status": status or {},
    }


@pytest.fixture
def prod() -> Cluster:
    return add_cluster("prod", KUBECONFIG)


@pytest.fixture
def staging() -> Cluster:
    return add_cluster("staging", KUBECONFIG)


def cert(cluster: Cluster, namespace: str = "team-a", **status: Any) -> ClusterResource:
    return mirrored(cluster, obj("Certificate", namespace, "web", status))


def request(cluster: Cluster, namespace: str = "team-a", **status: Any) -> ClusterResource:
    made = obj("CertificateRequest", namespace, "web-1", status)
    made["metadata"]["annotations"] = {"cert-manager.io/certificate-name": "web"}
    return mirrored(cluster, made)


def test_renew_queues_an_action_with_the_audit_event_and_wakes_the_worker(prod: Cluster) -> None:
    alice = user("alice", "operator")
    local_wakeup.clear()
    action = cluster_actions.request_renew(cert(prod), alice, message="rotate now")
    assert local_wakeup.is_set()
    assert (action.action, action.kind, action.uid, action.actor, action.reason) == (
        "renew",
        "Certificate",
        "uid-team-a-web",
        "alice",
        "ManuallyTriggered",
    )
    event = Event.objects.get()
    assert (event.kind, event.name, event.reason, event.actor) == (
        "Certificate",
        "prod/team-a/web",
        "ManuallyTriggered",
        "alice",
    )
    assert "rotate now" in event.message


def test_decisions_are_recorded_as_the_consoles_own(prod: Cluster) -> None:
    carol = user("carol", "approver")
    action = cluster_actions.request_decision(
        request(prod), carol, "Denied", reason="WrongDomain", message="not ours"
    )
    assert (action.action, action.reason, action.message) == ("deny", "WrongDomain", "not ours")
    event = Event.objects.get()
    assert (event.kind, event.name, event.reason, event.type, event.message) == (
        "CertificateRequest",
        "prod/team-a/web-1",
        "Denied",
        "Warning",
        "WrongDomain: not ours",
    )
    assert event.certificate_name == ""  # not one of the console's own certificates


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("viewer", set()),
        ("operator", {"renew"}),
        ("approver", {"approve"}),
        ("admin", {"renew", "approve"}),
    ],
)
def test_each_action_needs_its_role(prod: Cluster, role: str, allowed: set[str]) -> None:
    someone = user("someone", role)
    done = set()
    calls: list[tuple[str, Callable[[], ClusterAction]]] = [
        ("renew", lambda: cluster_actions.request_renew(cert(prod), someone)),
        ("approve", lambda: cluster_actions.request_decision(request(prod), someone, "Approved")),
    ]
    for name, call in calls:
        try:
            call()
            done.add(name)
        except cluster_actions.NotAllowed as exc:
            assert f"does not hold the {'operator' if name == 'renew' else 'approver'}" in str(exc)
    assert done == allowed
    assert ClusterAction.objects.count() == Event.objects.count() == len(allowed)


def test_a_scoped_user_acts_inside_the_scope_only(prod: Cluster, staging: Cluster) -> None:
    scoped = user("bob", "operator", (prod, "team-a"))
    assert cluster_actions.request_renew(cert(prod, "team-a"), scoped).namespace == "team-a"
    for resource in (cert(prod, "team-b"), cert(staging, "team-a")):
        with pytest.raises(cluster_actions.NotAllowed):
            cluster_actions.request_renew(resource, scoped)
    assert ClusterAction.objects.count() == 1
    whole = user("dora", "approver", (staging, ""))
    cluster_actions.request_decision(request(staging, "anything"), whole, "Approved")
    with pytest.raises(cluster_actions.NotAllowed):
        cluster_actions.request_decision(request(prod, "anything"), whole, "Approved")


def test_cmctl_refusals(prod: Cluster) -> None:
    admin = user("root", "admin")
    issuing = cert(
        prod, "busy", conditions=[{"type": "Issuing", "status": "True", "reason": "Renewing"}]
    )
    with pytest.raises(ActionError, match="already being issued"):
        cluster_actions.request_renew(issuing, admin)
    decided = request(prod, "done", conditions=[{"type": "Approved", "status": "True"}])
    with pytest.raises(ActionError, match="already Approved"):
        cluster_actions.request_decision(decided, admin, "Denied")
    with pytest.raises(ActionError, match="only a Certificate"):
        cluster_actions.request_renew(request(prod), admin)
    with pytest.raises(ActionError, match="only a CertificateRequest"):
        cluster_actions.request_decision(cert(prod), admin, "Approved")
    assert not ClusterAction.objects.exists() and not Event.objects.exists()


def test_a_second_request_while_one_is_queued_is_refused(prod: Cluster) -> None:
    admin = user("root", "admin")
    pending = request(prod)
    cluster_actions.request_decision(pending, admin, "Approved")
    with pytest.raises(ActionError, match="already has a decision queued"):
        cluster_actions.request_decision(pending, admin, "Denied")
    web = cert(prod)
    cluster_actions.request_renew(web, admin)
    with pytest.raises(ActionError, match="already queued"):
        cluster_actions.request_renew(web, admin)
    assert ClusterAction.objects.count() == Event.objects.count() == 2


def test_nothing_is_stored_when_the_audit_event_fails(
    prod: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = user("root", "admin")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("audit log down")

    monkeypatch.setattr("issuance.kubernetes.certmanager.cluster_actions.events.record", broken)
    with pytest.raises(RuntimeError):
        cluster_actions.request_renew(cert(prod), admin)
    assert not ClusterAction.objects.exists()


def test_queuing_costs_a_handful_of_queries(prod: Cluster) -> None:
    admin = user("root", "admin")
    web = cert(prod)
    with CaptureQueriesContext(connection) as ctx:
        cluster_actions.request_renew(web, admin)
    assert len(ctx.captured_queries) <= 10, [q["sql"] for q in ctx.captured_queries]
