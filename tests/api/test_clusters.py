"""The cluster-mode API: clusters (admin writes, kubeconfig never shown), mirrored objects with
renew/approve/deny queued as actions, scoped roles (404 outside the scope, 403 without the
role), and a bounded number of queries per list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import (
    Cluster,
    ClusterAction,
    ClusterResource,
    Event,
)
from tests.clusters.writeback_helpers import mirrored
from tests.factories import make_cluster as add_cluster
from tests.factories import scoped_user as user
from tests.web.mirror_builders import event

pytestmark = pytest.mark.django_db

SECRET_TOKEN = "tok-3f9a7c1d5e"
KUBECONFIG = f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:1"}}}}]
users: [{{name: u, user: {{token: {SECRET_TOKEN}}}}}]
contexts: [{{name: main, context: {{cluster: c, user: u}}}}, {{name: other, context: {{cluster: c, user: u}}}}]
current-context: main
"""
NS = "/api/v1/clusters/prod/namespaces"


def client_for(someone: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=someone)
    return client


def obj(kind: str, namespace: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{kind}-{namespace}-{name}",
            "managedFields": [{"manager": "cert-manager"}],
        },
        "spec": {"secretName": f"{name}-tls"},
        "status": status,
    }


@pytest.fixture
def world() -> dict[str, Any]:
    prod, staging = add_cluster("prod", KUBECONFIG), add_cluster("staging", KUBECONFIG)
    rows = {
        "web": mirrored(prod, obj("Certificate", "team-a", "web")),
        "api": mirrored(prod, obj("Certificate", "team-b", "api")),
        "stage": mirrored(staging, obj("Certificate", "team-a", "web")),
        "cr": mirrored(prod, obj("CertificateRequest", "team-a", "web-1")),
        "cr-b": mirrored(prod, obj("CertificateRequest", "team-b", "api-1")),
    }
    failed = timezone.now() - timedelta(minutes=5)
    web = rows["web"]
    web.ready, web.failed_attempts, web.last_failure_time = "False", 2, failed
    web.next_retry_at = failed + timedelta(hours=2)
    web.renewal_time = timezone.now() + timedelta(days=30)
    web.save()
    event(prod, web, "Issuing", "Issuing certificate as Secret does not exist")
    return {"prod": prod, "staging": staging, **rows}


@pytest.fixture
def users(db: None) -> dict[str, User]:
    return {
        "admin": user("root", "admin"),
        "viewer": user("vic", "viewer"),
        "operator": user("olga", "operator"),
        "approver": user("abe", "approver"),
    }


@pytest.fixture
def scoped(world: dict[str, Any]) -> dict[str, User]:
    """A viewer, an operator and an approver of prod/team-a only."""
    where = (world["prod"], "team-a")
    return {
        "viewer": user("sv", "viewer", where),
        "operator": user("so", "operator", where),
        "approver": user("sa", "approver", where),
    }


# -- clusters -------------------------------------------------------------------------------


def test_admin_adds_a_cluster_and_the_kubeconfig_never_comes_back(users: dict[str, User]) -> None:
    admin = client_for(users["admin"])
    made = admin.post(
        "/api/v1/clusters/",
        {"name": "edge", "kubeconfig": KUBECONFIG, "context": "other", "minBackoffSeconds": 60},
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert "kubeconfig" not in body
    assert (body["context"], body["minBackoffSeconds"], body["maxBackoffSeconds"]) == (
        "other",
        60,
        115200,
    )
    assert (body["state"], body["checkedAt"], body["createdBy"]) == ("Pending", None, "root")
    stored = Cluster.objects.get(name="edge")
    assert stored.kubeconfig == KUBECONFIG and SECRET_TOKEN not in stored.kubeconfig_ciphertext
    for url in ("/api/v1/clusters/", "/api/v1/clusters/edge/"):
        assert SECRET_TOKEN not in admin.get(url).content.decode()
    changed = admin.patch("/api/v1/clusters/edge/", {"context": "main"}, format="json")
    assert changed.status_code == 200 and SECRET_TOKEN not in changed.content.decode()
    assert Event.objects.filter(kind="Cluster", name="edge", actor="root").count() == 2
    assert admin.delete("/api/v1/clusters/edge/").status_code == 204
    assert not Cluster.objects.filter(name="edge").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "edge", "kubeconfig": "not: [valid"}, "kubeconfig"),
        ({"name": "edge", "kubeconfig": "a: b"}, "kubeconfig"),
        ({"name": "edge", "kubeconfig": KUBECONFIG, "context": "nope"}, "context"),
        ({"name": "edge"}, "kubeconfig"),
        ({"name": "Edge_1", "kubeconfig": KUBECONFIG}, "name"),
        ({"name": "edge", "kubeconfig": KUBECONFIG, "minBackoffSeconds": 0}, "minBackoffSeconds"),
        (
            {
                "name": "edge",
                "kubeconfig": KUBECONFIG,
                "minBackoffSeconds": 7200,
                "maxBackoffSeconds": 60,
            },
            "maxBackoffSeconds",
        ),
        ({"name": "edge", "kubeconfig": KUBECONFIG, "token": "x"}, "token"),
    ],
)
def test_a_bad_cluster_is_refused_naming_the_field(
    users: dict[str, User], body: dict[str, Any], field: str
) -> None:
    answer = client_for(users["admin"]).post("/api/v1/clusters/", body, format="json")
    assert answer.status_code == 400
    assert field in answer.json(), answer.json()
    assert SECRET_TOKEN not in answer.content.decode()
    assert not Cluster.objects.exists()


def test_only_admins_change_clusters_and_operators_may_ask_for_a_check(
    world: dict[str, Any], users: dict[str, User], scoped: dict[str, User]
) -> None:
    for role in ("viewer", "operator", "approver"):
        someone = client_for(users[role])
        assert someone.post("/api/v1/clusters/", {"name": "x"}, format="json").status_code == 403
        assert someone.delete("/api/v1/clusters/prod/").status_code == 403
    prod = world["prod"]
    prod.checked_at = timezone.now()
    prod.save()
    assert client_for(users["viewer"]).post("/api/v1/clusters/prod/check/").status_code == 403
    # A namespace-scoped operator does not hold the whole cluster.
    assert client_for(scoped["operator"]).post("/api/v1/clusters/prod/check/").status_code == 403
    answer = client_for(users["operator"]).post("/api/v1/clusters/prod/check/")
    assert answer.status_code == 202 and answer.json()["checkedAt"] is None
    prod.refresh_from_db()
    assert prod.checked_at is None


def test_a_scoped_user_sees_the_clusters_of_the_scope(
    world: dict[str, Any], users: dict[str, User], scoped: dict[str, User]
) -> None:
    everyone = client_for(users["viewer"]).get("/api/v1/clusters/").json()["results"]
    assert [c["name"] for c in everyone] == ["prod", "staging"]
    mine = client_for(scoped["viewer"])
    assert [c["name"] for c in mine.get("/api/v1/clusters/").json()["results"]] == ["prod"]
    assert mine.get("/api/v1/clusters/staging/").status_code == 404
    # ... and none of the console's own resources.
    assert mine.get("/api/v1/certificates/").status_code == 403


# -- mirrored objects -----------------------------------------------------------------------


def test_lists_and_details_show_derived_columns_spec_and_status(
    world: dict[str, Any], users: dict[str, User]
) -> None:
    viewer = client_for(users["viewer"])
    listed = viewer.get("/api/v1/clusters/prod/certificates/").json()
    assert [(r["namespace"], r["name"]) for r in listed["results"]] == [
        ("team-a", "web"),
        ("team-b", "api"),
    ]
    assert viewer.get("/api/v1/clusters/prod/certificates/?namespace=team-b").json()["count"] == 1
    assert viewer.get("/api/v1/clusters/prod/certificates/?ready=False").json()["count"] == 1
    web = viewer.get(f"{NS}/team-a/certificates/web/").json()
    assert (web["cluster"], web["kind"], web["uid"]) == (
        "prod",
        "Certificate",
        "uid-Certificate-team-a-web",
    )
    assert web["failedIssuanceAttempts"] == 2
    assert web["nextRetryTime"] is not None and web["renewalTime"] is not None
    assert web["spec"] == {"secretName": "web-tls"}
    assert "managedFields" not in web["metadata"]
    everywhere = viewer.get("/api/v1/clusters/-/certificates/").json()
    assert {r["cluster"] for r in everywhere["results"]} == {"prod", "staging"}
    timeline = viewer.get(f"{NS}/team-a/certificates/web/events/").json()
    assert [e["reason"] for e in timeline] == ["Issuing"]
    assert viewer.get(f"{NS}/team-a/certificates/nope/").status_code == 404
    assert viewer.get("/api/v1/clusters/nope/certificates/").status_code == 404
    assert viewer.get("/api/v1/clusters/-/namespaces/team-a/certificates/").json()["count"] == 2
    assert viewer.get("/api/v1/clusters/prod/certificates/?bogus=1").status_code == 400


def test_a_scoped_viewer_sees_nothing_outside_prod_team_a(
    world: dict[str, Any], scoped: dict[str, User]
) -> None:
    viewer = client_for(scoped["viewer"])
    assert viewer.get(f"{NS}/team-a/certificates/web/").status_code == 200
    for url in (
        f"{NS}/team-b/certificates/api/",
        f"{NS}/team-b/certificates/",
        f"{NS}/team-b/certificates/api/events/",
        "/api/v1/clusters/staging/namespaces/team-a/certificates/web/",
        "/api/v1/clusters/staging/certificates/",
        "/api/v1/clusters/prod/clusterissuers/anything/",
    ):
        assert viewer.get(url).status_code == 404, url
    # Cluster-scoped objects need the whole cluster in scope.
    assert viewer.get("/api/v1/clusters/prod/clusterissuers/").json()["count"] == 0
    listed = viewer.get("/api/v1/clusters/prod/certificates/").json()["results"]
    assert [(r["namespace"], r["name"]) for r in listed] == [("team-a", "web")]
    everywhere = viewer.get("/api/v1/clusters/-/certificates/").json()["results"]
    assert [(r["cluster"], r["name"]) for r in everywhere] == [("prod", "web")]
    # Acting on what it sees needs the role: 403; on what it does not see: 404.
    assert viewer.post(f"{NS}/team-a/certificates/web/renew/").status_code == 403
    assert viewer.post(f"{NS}/team-b/certificates/api/renew/").status_code == 404
    assert viewer.post(f"{NS}/team-a/certificaterequests/web-1/approve/").status_code == 403
    assert not ClusterAction.objects.exists()


def test_renew_answers_202_with_the_action_to_follow(
    world: dict[str, Any], scoped: dict[str, User], users: dict[str, User]
) -> None:
    operator = client_for(scoped["operator"])
    answer = operator.post(f"{NS}/team-a/certificates/web/renew/")
    assert answer.status_code == 202, answer.json()
    action = answer.json()
    assert (action["action"], action["state"], action["actor"], action["cluster"]) == (
        "renew",
        "Pending",
        "so",
        "prod",
    )
    followed = operator.get(f"/api/v1/clusters/prod/actions/{action['id']}/")
    assert followed.status_code == 200 and followed.json()["id"] == action["id"]
    again = operator.post(f"{NS}/team-a/certificates/web/renew/")
    assert again.status_code == 409 and "already queued" in again.json()["detail"]
    assert operator.post(f"{NS}/team-b/certificates/api/renew/").status_code == 404
    # The approver of prod/team-a holds no operator role there.
    assert (
        client_for(scoped["approver"]).post(f"{NS}/team-a/certificates/web/renew/").status_code
        == 403
    )
    # Another scope does not see the action.
    other = client_for(user("ob", "operator", (world["prod"], "team-b")))
    assert other.get(f"/api/v1/clusters/prod/actions/{action['id']}/").status_code == 404
    assert other.get("/api/v1/clusters/prod/actions/").json()["count"] == 0
    assert client_for(users["viewer"]).get("/api/v1/clusters/prod/actions/").json()["count"] == 1


def test_approve_and_deny_take_the_consoles_body(
    world: dict[str, Any], scoped: dict[str, User]
) -> None:
    approver = client_for(scoped["approver"])
    url = f"{NS}/team-a/certificaterequests/web-1"
    answer = approver.post(
        f"{url}/deny/", {"reason": "WrongDomain", "message": "not ours"}, format="json"
    )
    assert answer.status_code == 202
    assert (answer.json()["action"], answer.json()["reason"]) == ("deny", "WrongDomain")
    again = approver.post(f"{url}/approve/", {}, format="json")
    assert again.status_code == 409
    bad = approver.post(f"{url}/approve/", {"reason": 5}, format="json")
    assert bad.status_code == 400 and "reason" in bad.json()
    assert approver.post(f"{NS}/team-b/certificaterequests/api-1/approve/").status_code == 404
    assert client_for(scoped["operator"]).post(f"{url}/approve/").status_code == 403
    row: ClusterResource = world["cr"]
    row.state = "Approved"
    row.save()
    ClusterAction.objects.all().delete()
    decided = approver.post(f"{url}/approve/")
    assert decided.status_code == 409 and "already Approved" in decided.json()["detail"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/clusters/",
        "/api/v1/clusters/prod/certificates/",
        "/api/v1/clusters/-/certificates/",
        "/api/v1/clusters/prod/namespaces/team-a/certificaterequests/",
        "/api/v1/clusters/prod/actions/",
    ],
)
@pytest.mark.parametrize("who", ["unscoped", "scoped"])
def test_list_queries_do_not_grow_with_page_size(world: dict[str, Any], url: str, who: str) -> None:
    prod = world["prod"]
    viewer = user("lister", "viewer", *([(prod, "team-a")] if who == "scoped" else []))
    client = client_for(viewer)

    def populate(start: int, stop: int) -> None:
        for i in range(start, stop):
            mirrored(prod, obj("Certificate", "team-a", f"c-{i}"))
            mirrored(prod, obj("CertificateRequest", "team-a", f"c-{i}-1"))
            ClusterAction.objects.create(
                cluster=prod,
                action="renew",
                kind="Certificate",
                namespace="team-a",
                name=f"c-{i}",
                actor="x",
            )
            add_cluster(f"extra-{i}", KUBECONFIG)

    def measure() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as ctx:
            answer = client.get(url + "?limit=100")
        assert answer.status_code == 200, answer.content
        return len(ctx.captured_queries), len(answer.json()["results"])

    client.get(url)  # the user's roles and scope are looked up once and cached on the user
    populate(0, 3)
    small_queries, small_rows = measure()
    populate(3, 30)
    large_queries, large_rows = measure()
    assert large_rows > small_rows or (who == "scoped" and url == "/api/v1/clusters/")
    assert large_queries == small_queries <= 6, (url, small_queries, large_queries)


def test_a_change_writes_only_its_own_columns(
    world: dict[str, Any], users: dict[str, User]
) -> None:
    """The sync writes the same row (state, last sync, its lease): a change from the API must
    not write back what it read before."""
    admin = client_for(users["admin"])
    with CaptureQueriesContext(connection) as ctx:
        answer = admin.patch(
            "/api/v1/clusters/prod/", {"maxBackoffSeconds": 7200, "context": "other"}, format="json"
        )
    assert answer.status_code == 200, answer.json()
    (update,) = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    for column in ("state", "last_sync", "sync_owner", "sync_lease_until", "api_versions"):
        assert f'"{column}"' not in update, update
    assert '"checked_at"' in update and '"max_backoff_seconds"' in update


def test_an_in_cluster_cluster_in_the_api(users: dict[str, User]) -> None:
    Cluster.objects.create(name="local", in_cluster=True)
    admin = client_for(users["admin"])
    body = admin.get("/api/v1/clusters/local/").json()
    assert (body["inCluster"], body["context"]) == (True, "")
    # Sent back as read (inCluster ignored), with a new backoff: accepted.
    changed = admin.put("/api/v1/clusters/local/", {**body, "minBackoffSeconds": 60}, format="json")
    assert changed.status_code == 200, changed.json()
    assert Cluster.objects.get(name="local").min_backoff_seconds == 60
    refused = admin.patch("/api/v1/clusters/local/", {"context": "x"}, format="json")
    assert refused.status_code == 400
    assert "no kubeconfig context" in str(refused.json())
    assert Cluster.objects.get(name="local").context == ""
    # A kubeconfig makes it a kubeconfig cluster.
    made = admin.patch("/api/v1/clusters/local/", {"kubeconfig": KUBECONFIG}, format="json")
    assert made.status_code == 200 and made.json()["inCluster"] is False
    assert Cluster.objects.get(name="local").kubeconfig == KUBECONFIG
