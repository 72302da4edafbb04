"""Renew, approve and deny written back to a real kube-apiserver with cert-manager's CRDs, as
cmctl writes them, and read back with the Kubernetes client."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from issuance.kubernetes.certmanager import cluster_actions, kubeconfig, writeback
from issuance.models import Cluster, ClusterAction, ClusterActionState, Event
from tests.clusters import cm
from tests.clusters.conftest import CmCluster
from tests.clusters.writeback_helpers import condition, mirrored
from tests.factories import make_cluster as add_cluster
from tests.factories import scoped_user as user
from tests.helpers import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.django_db]

Obj = dict[str, Any]


class Crash(BaseException):
    """A worker dying mid-action: not an Exception, so nothing records it."""


@pytest.fixture(autouse=True)
def _hooks() -> Iterator[None]:
    yield
    writeback.BEFORE_WRITE = None
    writeback.AFTER = None
    kubeconfig.forget()


@pytest.fixture
def prod(cm_a: CmCluster) -> Cluster:
    return add_cluster("prod", cm_a.console_kubeconfig)


@pytest.fixture
def operator(db: None) -> User:
    return user("alice", "operator")


@pytest.fixture
def approver(db: None) -> User:
    return user("carol", "approver")


def failing_certificate(cm_a: CmCluster, namespace: str, name: str = "web") -> Obj:
    made: Obj = cm_a.objects().create(
        cm.certificate(name, namespace), status=cm.failed_status(2, cm.now())
    )
    return made


def request(cm_a: CmCluster, namespace: str, name: str = "web-1", status: Obj | None = None) -> Obj:
    made: Obj = cm_a.objects().create(cm.certificate_request(name, namespace, "web"), status=status)
    return made


def events_by_us(cm_a: CmCluster, namespace: str, name: str) -> list[Obj]:
    return [
        e
        for e in cm_a.objects().events_for(namespace, name)
        if (e.get("source") or {}).get("component") == "issuance-console"
    ]


def test_renew_sets_issuing_as_cmctl_and_records_an_event(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User
) -> None:
    cert = failing_certificate(cm_a, namespace)
    action = cluster_actions.request_renew(
        mirrored(prod, cert), operator, message="after the DNS fix"
    )
    assert action.state == ClusterActionState.PENDING
    assert writeback.run_due(prod)
    action.refresh_from_db()
    assert (action.state, action.attempts, action.last_error) == (ClusterActionState.DONE, 1, "")
    now = cm_a.objects().get("Certificate", namespace, "web")
    (issuing,) = condition(now, "Issuing")  # replaced in place (cmctl), not appended
    assert issuing["status"] == "True"
    assert issuing["reason"] == "ManuallyTriggered"
    assert "by alice in Issuance Console" in issuing["message"]
    assert "after the DNS fix" in issuing["message"]
    assert issuing["observedGeneration"] == now["metadata"]["generation"]
    assert issuing["lastTransitionTime"]
    assert now["status"]["failedIssuanceAttempts"] == 2  # the rest of the status kept
    (event,) = events_by_us(cm_a, namespace, "web")
    involved = event["involved_object"]
    assert (involved["kind"], involved["uid"], involved["api_version"]) == (
        "Certificate",
        cert["metadata"]["uid"],
        "cert-manager.io/v1",
    )
    assert event["reason"] == "ManuallyTriggered" and "alice" in event["message"]
    audit = Event.objects.filter(kind="Certificate", name=f"prod/{namespace}/web")
    assert set(audit.values_list("reason", "actor")) == {
        ("ManuallyTriggered", "alice"),
        ("WrittenToCluster", "alice"),
    }
    assert not writeback.run_due(prod)  # nothing due any more


def test_approve_and_deny_set_their_conditions(
    cm_a: CmCluster, namespace: str, prod: Cluster, approver: User
) -> None:
    first, second = request(cm_a, namespace, "web-1"), request(cm_a, namespace, "web-2")
    cluster_actions.request_decision(mirrored(prod, first), approver, "Approved")
    cluster_actions.request_decision(
        mirrored(prod, second), approver, "Denied", reason="WrongDomain", message="not ours"
    )
    writeback.run_due(prod)
    assert set(ClusterAction.objects.values_list("state", flat=True)) == {"Done"}
    (approved,) = condition(
        cm_a.objects().get("CertificateRequest", namespace, "web-1"), "Approved"
    )
    assert approved["status"] == "True" and approved["reason"] == "ManuallyApproved"
    assert "approved by carol in Issuance Console" in approved["message"]
    got = cm_a.objects().get("CertificateRequest", namespace, "web-2")
    (denied,) = condition(got, "Denied")
    assert denied["reason"] == "WrongDomain" and denied["message"].endswith(": not ours")
    assert not condition(got, "Approved")
    (event,) = events_by_us(cm_a, namespace, "web-2")
    assert event["type"] == "Warning" and event["reason"] == "WrongDomain"


def test_a_request_decided_in_the_cluster_meanwhile_fails_naming_it(
    cm_a: CmCluster, namespace: str, prod: Cluster, approver: User
) -> None:
    obj = request(cm_a, namespace)
    row = mirrored(prod, obj)  # the mirror still says pending
    cm_a.objects().set_status(
        cm_a.objects().get("CertificateRequest", namespace, "web-1"),
        {
            "conditions": [
                {
                    "type": "Denied",
                    "status": "True",
                    "reason": "PolicyDenied",
                    "message": "denied by policy",
                    "lastTransitionTime": cm.ts(cm.now()),
                }
            ]
        },
    )
    action = cluster_actions.request_decision(row, approver, "Approved")
    writeback.run_due(prod)
    action.refresh_from_db()
    assert action.state == ClusterActionState.FAILED
    assert "already Denied" in action.last_error and "PolicyDenied" in action.last_error
    got = cm_a.objects().get("CertificateRequest", namespace, "web-1")
    assert not condition(got, "Approved")
    assert Event.objects.filter(reason="WriteBackFailed", type="Warning").count() == 1


def test_a_stale_write_is_read_again_and_retried(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User
) -> None:
    cert = failing_certificate(cm_a, namespace)
    action = cluster_actions.request_renew(mirrored(prod, cert), operator)
    changes: list[Obj] = []

    def meddle(act: ClusterAction, obj: Obj) -> None:
        if not changes:  # someone else writes between our read and our write, once
            fresh = cm_a.objects().get("Certificate", namespace, "web")
            fresh["metadata"].setdefault("labels", {})["touched"] = "yes"
            changes.append(cm_a.objects().update(fresh))

    writeback.BEFORE_WRITE = meddle
    writeback.run_due(prod)
    action.refresh_from_db()
    assert (action.state, action.conflicts) == (ClusterActionState.DONE, 1)
    now = cm_a.objects().get("Certificate", namespace, "web")
    assert now["metadata"]["labels"] == {"touched": "yes"}  # their change kept
    assert condition(now, "Issuing")[0]["status"] == "True"
    assert "after 1 conflict" in Event.objects.get(reason="WrittenToCluster").message


@pytest.mark.parametrize("stage", ["written", "recorded"])
def test_a_crash_after_the_write_duplicates_nothing(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User, approver: User, stage: str
) -> None:
    cert = failing_certificate(cm_a, namespace)
    cr = request(cm_a, namespace)
    renew = cluster_actions.request_renew(mirrored(prod, cert), operator)
    approve = cluster_actions.request_decision(mirrored(prod, cr), approver, "Approved")

    crashed: set[str] = set()

    def crash(at: str, act: ClusterAction) -> None:
        if at == stage and act.action not in crashed:  # each action dies once
            crashed.add(act.action)
            raise Crash

    writeback.AFTER = crash
    for _ in range(2):
        with pytest.raises(Crash):
            writeback.run_due(prod)
    assert crashed == {"renew", "approve"}
    # The renewal, tried again after its crash, was done in the second pass before the
    # approval died in its turn.
    assert ClusterAction.objects.get(pk=approve.pk).state == ClusterActionState.PENDING
    assert writeback.run_due(prod)  # the worker, started again
    assert not writeback.run_due(prod)
    for action in (renew, approve):
        action.refresh_from_db()
        assert action.state == ClusterActionState.DONE
    for kind, name, type_ in (
        ("Certificate", "web", "Issuing"),
        ("CertificateRequest", "web-1", "Approved"),
    ):
        assert len(condition(cm_a.objects().get(kind, namespace, name), type_)) == 1
        assert len(events_by_us(cm_a, namespace, name)) == 1, (kind, stage)


def test_a_deleted_or_replaced_object_fails_the_action(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User
) -> None:
    gone = mirrored(prod, failing_certificate(cm_a, namespace, "gone"))
    replaced = mirrored(prod, failing_certificate(cm_a, namespace, "replaced"))
    first = cluster_actions.request_renew(gone, operator)
    second = cluster_actions.request_renew(replaced, operator)
    cm_a.objects().delete("Certificate", namespace, "gone")
    cm_a.objects().delete("Certificate", namespace, "replaced")
    failing_certificate(cm_a, namespace, "replaced")  # same name, another uid
    writeback.run_due(prod)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == second.state == ClusterActionState.FAILED
    assert "no longer exists" in first.last_error
    assert "replaced by another object" in second.last_error
    (issuing,) = condition(cm_a.objects().get("Certificate", namespace, "replaced"), "Issuing")
    assert issuing["status"] == "False"  # the new object untouched


def test_missing_rbac_fails_naming_the_permission(
    cm_a: CmCluster, namespace: str, operator: User, approver: User
) -> None:
    limited = add_cluster("limited", cm_a.limited_kubeconfig)
    renew = cluster_actions.request_renew(
        mirrored(limited, failing_certificate(cm_a, namespace)), operator
    )
    approve = cluster_actions.request_decision(
        mirrored(limited, request(cm_a, namespace)), approver, "Approved"
    )
    writeback.run_due(limited)
    renew.refresh_from_db()
    approve.refresh_from_db()
    assert renew.state == approve.state == ClusterActionState.FAILED
    assert "grant `update certificates/status.cert-manager.io`" in renew.last_error
    assert "grant `get certificaterequests.cert-manager.io`" in approve.last_error
    assert (
        condition(cm_a.objects().get("Certificate", namespace, "web"), "Issuing")[0]["status"]
        == "False"
    )


def test_an_unreachable_api_server_keeps_the_action_until_it_is_back(
    cm_b: CmCluster, namespace: str, operator: User
) -> None:
    staging = add_cluster("staging", cm_b.console_kubeconfig)
    cert = cm_b.objects().create(
        cm.certificate("web", namespace), status=cm.failed_status(1, cm.now())
    )
    action = cluster_actions.request_renew(mirrored(staging, cert), operator)
    cm_b.server.kill_apiserver()
    try:
        writeback.run_due(staging)
        action.refresh_from_db()
        assert action.state == ClusterActionState.PENDING
        assert "cannot reach the API server" in action.last_error
        first_retry = action.next_attempt_at
        assert first_retry > action.created_at
        wait_for(
            lambda: (
                writeback.run_due(staging) and ClusterAction.objects.get(pk=action.pk).attempts >= 3
            ),
            30,
            "three attempts while the API server is down",
        )
        action.refresh_from_db()
        assert action.state == ClusterActionState.PENDING
        # Growing pauses: 1 s, 2 s, 4 s …
        assert (action.next_attempt_at - first_retry).total_seconds() >= 2
    finally:
        cm_b.server.start_apiserver()
    wait_for(
        lambda: (
            writeback.run_due(staging)
            and ClusterAction.objects.get(pk=action.pk).state == ClusterActionState.DONE
        ),
        90,
        "the renewal written once the API server is back",
    )
    now = cm_b.objects().get("Certificate", namespace, "web")
    assert condition(now, "Issuing")[0]["status"] == "True"


def test_the_api_and_certctl_queue_what_the_worker_writes(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User, approver: User
) -> None:
    mirrored(prod, failing_certificate(cm_a, namespace))
    mirrored(prod, request(cm_a, namespace))
    client = APIClient()
    client.force_authenticate(user=operator)
    base = f"/api/v1/clusters/prod/namespaces/{namespace}"
    queued = client.post(f"{base}/certificates/web/renew/")
    assert queued.status_code == 202 and queued.json()["state"] == "Pending"
    out = StringIO()
    call_command("certctl", "approve", f"prod/{namespace}/web-1", "--as", "carol", stdout=out)
    assert "queued" in out.getvalue()
    assert writeback.run_due(prod)
    followed = client.get(f"/api/v1/clusters/prod/actions/{queued.json()['id']}/").json()
    assert (followed["state"], followed["attempts"]) == ("Done", 1)
    (issuing,) = condition(cm_a.objects().get("Certificate", namespace, "web"), "Issuing")
    assert issuing["status"] == "True" and "by alice" in issuing["message"]
    (approved,) = condition(
        cm_a.objects().get("CertificateRequest", namespace, "web-1"), "Approved"
    )
    assert "approved by carol" in approved["message"]


def test_a_certificate_already_issuing_in_the_cluster_is_left_alone(
    cm_a: CmCluster, namespace: str, prod: Cluster, operator: User
) -> None:
    cert = failing_certificate(cm_a, namespace)
    action = cluster_actions.request_renew(mirrored(prod, cert), operator)  # the mirror is behind
    now = cm_a.objects().get("Certificate", namespace, "web")
    issuing = {
        "type": "Issuing",
        "status": "True",
        "reason": "Renewing",
        "message": "Renewing certificate as renewal was scheduled",
        "lastTransitionTime": cm.ts(cm.now()),
        "observedGeneration": 1,
    }
    cm_a.objects().set_status(now, {**now["status"], "conditions": [issuing]})
    writeback.run_due(prod)
    action.refresh_from_db()
    assert action.state == ClusterActionState.DONE
    assert condition(cm_a.objects().get("Certificate", namespace, "web"), "Issuing") == [issuing]
    assert events_by_us(cm_a, namespace, "web") == []  # we did nothing: no Event says we did
    assert "already being issued" in Event.objects.get(reason="WrittenToCluster").message
