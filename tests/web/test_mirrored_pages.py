"""Mirrored cert-manager objects in the console: lists beside own rows (filters, paging),
detail pages (status, next retry countdown, children, timeline), the dashboard section,
and scoped users (only their namespaces, 404 elsewhere, no buttons without the role)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from issuance.models import Cluster, ClusterAction, Issuer, MirroredKind
from tests.factories import make_certificate, scoped_user
from tests.web.builders import ready_certificate
from tests.web.mirror_builders import (
    child,
    event,
    failing_cert,
    make_cluster,
    pending_cr,
    ready_cert,
)

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
CERT_URL = "/clusters/prod/team-a/certificates/web/"


@pytest.fixture
def prod() -> Cluster:
    return make_cluster("prod")


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_certificates_list_shows_mirrored_beside_own_with_filters(
    client_for: ClientFor, issuer: Issuer, prod: Cluster
) -> None:
    ready_certificate("own-cert", issuer)
    ready_cert(prod, "team-a", "web")
    failing_cert(make_cluster("staging"), "team-b", "api")
    viewer = client_for("viewer")
    html = viewer.get("/certificates/").content.decode()
    assert 'data-certificate="own-cert"' in html
    assert 'data-mirrored-certificate="prod/team-a/web"' in html
    assert 'data-mirrored-certificate="staging/team-b/api"' in html
    assert f'href="{CERT_URL}"' in html and "<th>Cluster</th><th>Namespace</th>" in html
    console_only = viewer.get("/certificates/?source=console").content.decode()
    assert "own-cert" in console_only and "data-mirrored-certificate" not in console_only
    one_cluster = viewer.get("/certificates/?source=staging").content.decode()
    assert "staging/team-b/api" in one_cluster and "own-cert" not in one_cluster
    assert "prod/team-a/web" not in one_cluster
    namespace = viewer.get("/certificates/?namespace=team-a").content.decode()
    assert "prod/team-a/web" in namespace and "own-cert" not in namespace
    assert "team-b/api" not in namespace
    backoff = viewer.get("/certificates/?backoff=1").content.decode()
    assert "staging/team-b/api" in backoff and "prod/team-a/web" not in backoff


def test_combined_pagination_has_every_row_once(
    client_for: ClientFor, issuer: Issuer, prod: Cluster
) -> None:
    for i in range(30):
        make_certificate(f"own-{i:02}", issuer)
    for i in range(40):
        ready_cert(prod, "team-a", f"m-{i:02}")
    viewer = client_for("viewer")
    seen: list[str] = []
    for page in (1, 2):
        html = viewer.get(f"/certificates/?page={page}").content.decode()
        seen += re.findall(r'data-certificate="([^"]+)"', html)
        seen += re.findall(r'data-mirrored-certificate="prod/team-a/([^"]+)"', html)
        assert f"Page {page} of 2 (70 certificates)" in html
    assert len(seen) == 70 and len(set(seen)) == 70
    assert seen[:30] == [f"own-{i:02}" for i in range(30)]  # own rows first, then mirrored


def test_list_query_count_does_not_grow_with_rows(
    client_for: ClientFor,
    issuer: Issuer,
    prod: Cluster,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    viewer = client_for("viewer")
    ready_cert(prod, "team-a", "first")
    viewer.get("/certificates/")  # session, user warm-up
    with django_assert_max_num_queries(30) as few:
        viewer.get("/certificates/")
    # Read now: every request clears Django's query log.
    baseline = len(few.captured_queries)
    for i in range(40):
        failing_cert(prod, f"ns-{i % 4}", f"c-{i:02}")
    for path in ("/certificates/", "/orders/", "/challenges/", "/requests/", "/"):
        viewer.get(path)
    with django_assert_max_num_queries(baseline) as many:
        viewer.get("/certificates/")
    assert len(many) == baseline


def test_mirrored_certificate_detail(client_for: ClientFor, prod: Cluster) -> None:
    cert = failing_cert(prod, "team-a", "web", attempts=3, message=f"order failed {SCRIPT}")
    cr = pending_cr(prod, "team-a", "web-1", "web")
    order = child(prod, MirroredKind.ORDER, "team-a", "web-1-123", "web", state="pending")
    challenge = child(prod, MirroredKind.CHALLENGE, "team-a", "web-1-123-0", "web")
    child(prod, MirroredKind.ORDER, "team-b", "elsewhere", "web")  # another namespace
    event(prod, cert, "Issuing", "Issuing certificate as Secret does not exist", timedelta(hours=2))
    event(prod, order, "Created", f"Created Challenge {SCRIPT}", timedelta(minutes=30))
    event(prod, challenge, "Presented", "Presented challenge", timedelta(minutes=5))
    response = client_for("viewer").get(CERT_URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="mirrored-ready" data-ready="False"' in html
    assert 'id="mirrored-reason" data-reason="DoesNotExist"' in html
    assert 'id="mirrored-failed-attempts" data-attempts="3"' in html
    retry = re.search(r'id="mirrored-next-retry"[^>]*>\s*<time data-countdown="([^"]+)"', html)
    assert retry is not None and cert.next_retry_at is not None
    # 1 h × 2^(3−1) = 4 h after the last failure (cert-manager's default backoff).
    assert cert.last_failure_time is not None
    assert cert.next_retry_at - cert.last_failure_time == timedelta(hours=4)
    assert retry.group(1).startswith(cert.next_retry_at.strftime("%Y-%m-%dT%H:%M"))
    assert SCRIPT not in html and ESCAPED in html
    for name in (cr.name, order.name, challenge.name):
        assert 'data-child="' in html and name in html
    assert "elsewhere" not in html
    reasons = re.findall(r'data-event-reason="([^"]+)"', html)
    assert reasons == ["Presented", "Created", "Issuing"]  # newest first, children included
    assert 'data-live-topics="k8s:prod/team-a"' in html
    assert "force-renew" not in html  # a viewer
    assert 'id="force-renew"' in client_for("operator").get(CERT_URL).content.decode()
    partial = client_for("viewer").get(f"/partials{CERT_URL}status/")
    assert partial.status_code == 200 and b'id="mirrored-next-retry"' in partial.content


def test_detail_query_count_does_not_grow_with_children(
    client_for: ClientFor, prod: Cluster, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    cert = failing_cert(prod, "team-a", "web")
    viewer = client_for("viewer")
    viewer.get(CERT_URL)
    with django_assert_max_num_queries(30) as few:
        viewer.get(CERT_URL)
    baseline = len(few.captured_queries)
    for i in range(25):
        cr = child(prod, MirroredKind.CERTIFICATE_REQUEST, "team-a", f"web-{i}", "web")
        event(prod, cr, "Requested", f"event {i}")
        event(prod, cert, "Issuing", f"event {i}")
    with django_assert_max_num_queries(baseline):
        html = viewer.get(CERT_URL).content.decode()
    assert "web-24" in html


def test_request_detail_decodes_the_csr_and_offers_decisions(
    client_for: ClientFor, prod: Cluster
) -> None:
    pending_cr(prod, "team-a", "web-1", "web")
    url = "/clusters/prod/team-a/certificaterequests/web-1/"
    html = client_for("viewer").get(url).content.decode()
    assert ("web.example.com" in html and "ECDSA" in html) or "RSA" in html
    assert 'data-state="Pending"' in html
    assert "/approve/" not in html  # a viewer
    approver = client_for("approver").get(url).content.decode()
    assert f"{url}approve/" in approver and f"{url}deny/" in approver
    assert client_for("viewer").post(f"{url}approve/").status_code == 403
    assert client_for("operator").post(f"{url}deny/").status_code == 403
    assert not ClusterAction.objects.exists()


def test_read_only_pages_for_orders_challenges_issuers(
    client_for: ClientFor, prod: Cluster
) -> None:
    child(prod, MirroredKind.ORDER, "team-a", "o-1", "web", state="valid")
    child(prod, MirroredKind.ISSUER, "team-a", "ca", "")
    child(prod, MirroredKind.CLUSTER_ISSUER, "", "letsencrypt", "")
    viewer = client_for("viewer")
    for url in (
        "/clusters/prod/team-a/orders/o-1/",
        "/clusters/prod/team-a/issuers/ca/",
        "/clusters/prod/clusterissuers/letsencrypt/",
    ):
        response = viewer.get(url)
        assert response.status_code == 200, url
        assert b'<form method="post" action="/clusters' not in response.content
    assert viewer.get("/clusters/prod/team-a/widgets/o-1/").status_code == 404
    orders = viewer.get("/orders/").content.decode()
    assert 'data-mirrored-order="prod/team-a/o-1"' in orders


def test_approval_queue_and_challenges_list_show_mirrored(
    client_for: ClientFor, prod: Cluster
) -> None:
    pending_cr(prod, "team-a", "web-1", "web")
    decided = pending_cr(prod, "team-a", "web-0", "web")
    decided.state = "Approved"
    decided.save()
    child(prod, MirroredKind.CHALLENGE, "team-a", "ch-1", "web", state="pending")
    queue = client_for("approver").get("/requests/").content.decode()
    assert 'data-mirrored-request="prod/team-a/web-1"' in queue
    assert "prod/team-a/web-0" not in queue
    assert "/clusters/prod/team-a/certificaterequests/web-1/approve/" in queue
    assert "approve/" not in client_for("viewer").get("/requests/").content.decode()
    challenges = client_for("viewer").get("/challenges/").content.decode()
    assert 'data-mirrored-challenge="prod/team-a/ch-1"' in challenges


def test_dashboard_counts_per_cluster(client_for: ClientFor, prod: Cluster) -> None:
    ready_cert(prod, "team-a", "ok-1")
    ready_cert(prod, "team-a", "soon", days_left=10)
    failing_cert(prod, "team-b", "broken")
    ready_cert(make_cluster("staging"), "team-a", "s-1")
    html = client_for("viewer").get("/").content.decode()
    assert (
        'data-cluster="prod" data-total="3" data-ready="2" data-failing="1" data-expiring="1"'
        in html
    )
    assert 'data-cluster="staging" data-total="1"' in html
    assert 'data-mirrored-certificate="prod/team-b/broken"' in html
    filtered = client_for("viewer").get("/?cluster=prod&namespace=team-a").content.decode()
    assert 'data-cluster="prod" data-total="2" data-ready="2" data-failing="0"' in filtered
    assert 'data-cluster="staging"' not in filtered


def test_scoped_viewer_sees_only_their_namespace(
    client_for: ClientFor, issuer: Issuer, prod: Cluster
) -> None:
    ready_certificate("own-cert", issuer)
    ready_cert(prod, "team-a", "web")
    ready_cert(prod, "team-b", "other-team")
    ready_cert(make_cluster("staging"), "team-a", "staging-web")
    pending_cr(prod, "team-b", "other-cr", "other-team")
    client = _login(scoped_user("team-a-viewer", "viewer", (prod, "team-a")))
    for path in ("/certificates/", "/", "/requests/", "/orders/", "/challenges/"):
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert "own-cert" not in html and "other-team" not in html, path
        assert "staging-web" not in html and "other-cr" not in html, path
        assert 'data-live-groups="k8s:prod/team-a"' in html, path
        assert "/issuers/" not in html and "/audit/" not in html, path  # nav
    assert "prod/team-a/web" in client.get("/certificates/").content.decode()
    dashboard = client.get("/").content.decode()
    assert 'id="dash-clusters"' in dashboard and 'data-cluster="prod" data-total="1"' in dashboard
    assert 'id="dash-counts"' not in dashboard and 'id="dash-charts"' not in dashboard
    assert client.get(CERT_URL).status_code == 200
    assert client.get("/clusters/prod/team-b/certificates/other-team/").status_code == 404
    assert client.get("/clusters/staging/team-a/certificates/staging-web/").status_code == 404
    assert client.get("/clusters/prod/team-b/certificaterequests/other-cr/").status_code == 404
    assert client.get("/certificates/own-cert/").status_code == 403  # own pages stay closed
    assert client.get("/issuers/").status_code == 403
    assert client.get("/partials/dashboard/counts/").status_code == 403
    assert client.get("/partials/dashboard/clusters/").status_code == 200
    assert "force-renew" not in client.get(CERT_URL).content.decode()
    assert client.post(f"{CERT_URL}renew/").status_code == 403


def test_scoped_operator_renews_only_in_scope(prod: Cluster) -> None:
    ready_cert(prod, "team-a", "web")
    ready_cert(prod, "team-b", "other")
    client = _login(scoped_user("team-a-op", "operator", (prod, "team-a")))
    assert 'id="force-renew"' in client.get(CERT_URL).content.decode()
    assert client.post("/clusters/prod/team-b/certificates/other/renew/").status_code == 404
    assert not ClusterAction.objects.exists()


def test_actions_need_the_csrf_token(role_users: dict[str, User], prod: Cluster) -> None:
    ready_cert(prod, "team-a", "web")
    pending_cr(prod, "team-a", "web-1", "web")
    client = Client(enforce_csrf_checks=True)
    client.force_login(role_users["admin"])
    assert client.post(f"{CERT_URL}renew/").status_code == 403
    url = "/clusters/prod/team-a/certificaterequests/web-1/approve/"
    assert client.post(url, {"reason": "Fine"}).status_code == 403
    assert not ClusterAction.objects.exists()


def test_bad_decision_reason_names_the_field_and_queues_nothing(
    client_for: ClientFor, prod: Cluster
) -> None:
    pending_cr(prod, "team-a", "web-1", "web")
    url = "/clusters/prod/team-a/certificaterequests/web-1/deny/"
    response = client_for("approver").post(url, {"reason": "not a word!"}, follow=True)
    assert "reason: use a CamelCase word" in response.content.decode()
    assert not ClusterAction.objects.exists()


def test_force_renew_queues_a_cluster_action(client_for: ClientFor, prod: Cluster) -> None:
    ready_cert(prod, "team-a", "web")
    response = client_for("operator").post(f"{CERT_URL}renew/")
    assert response.status_code == 302
    action = ClusterAction.objects.get()
    assert (action.action, action.kind, action.namespace, action.name) == (
        "renew",
        "Certificate",
        "team-a",
        "web",
    )
    assert action.actor == "operator"


def test_approve_and_deny_queue_cluster_actions(client_for: ClientFor, prod: Cluster) -> None:
    pending_cr(prod, "team-a", "web-1", "web")
    base = "/clusters/prod/team-a/certificaterequests/web-1/"
    approver = client_for("approver")
    response = approver.post(f"{base}approve/", {"reason": "LooksRight", "message": "ok"})
    assert response.status_code == 302
    action = ClusterAction.objects.get()
    assert (action.action, action.reason, action.actor) == ("approve", "LooksRight", "approver")


def test_partials_refetched_by_live_updates_keep_the_scope(prod: Cluster) -> None:
    pending_cr(prod, "team-a", "web-1", "web")
    pending_cr(prod, "team-b", "other-1", "other")
    failing_cert(prod, "team-b", "other")
    client = _login(scoped_user("team-a-approver", "approver", (prod, "team-a")))
    mine = client.get("/partials/clusters/prod/team-a/certificaterequests/web-1/")
    assert mine.status_code == 200
    assert b'data-state="Pending"' in mine.content and b"/approve/" in mine.content
    assert b"<html" not in mine.content  # a fragment, not a page
    for url in (
        "/partials/clusters/prod/team-b/certificaterequests/other-1/",
        "/partials/clusters/prod/team-b/certificates/other/status/",
        "/partials/clusters/prod/team-b/certificates/other/timeline/",
    ):
        assert client.get(url).status_code == 404, url
    assert client.get("/partials/cluster/prod/").status_code == 200
    assert client.get("/partials/certificates/").status_code == 200
    assert b"other" not in client.get("/partials/certificates/").content
