"""Every console page renders for a viewer with its key data; login is required everywhere."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.http import FileResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import Settings

from issuance.models import AcmeServer, Event, Issuer
from tests.factories import make_certificate
from tests.web.builders import acme_chain, backoff_certificate, pending_request, ready_certificate

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]

PAGES = [
    reverse("web:dashboard"),
    reverse("web:certificates"),
    reverse("web:requests"),
    reverse("web:issuers"),
    reverse("web:orders"),
    reverse("web:challenges"),
    reverse("web:dashboard-partial", args=["counts"]),
    reverse("web:certificates-partial"),
    reverse("web:requests-partial"),
]


def test_certificate_detail_needs_login(client_for: ClientFor, issuer: Issuer) -> None:
    ready_certificate("web", issuer)
    url = reverse("web:certificate-detail", args=["web"])
    assert client_for(None).get(url).status_code == 302
    assert client_for("viewer").get(url).status_code == 200


def test_login_page_and_login_flow(client_for: ClientFor) -> None:
    client = client_for(None)
    page = client.get("/login/")
    assert page.status_code == 200
    assert b"csrfmiddlewaretoken" in page.content
    bad = client.post("/login/", {"username": "viewer", "password": "wrong"})
    assert bad.status_code == 200
    assert b"didn't match" in bad.content
    good = client.post("/login/", {"username": "viewer", "password": "pw-viewer", "next": "/"})
    assert good.status_code == 302
    assert client.get("/").status_code == 200
    out = client.post("/logout/")
    assert out.status_code == 302
    assert client.get("/").status_code == 302


def test_dashboard_shows_counts_queue_backoff_pauses_renewals(
    client_for: ClientFor, issuer: Issuer, settings: Settings
) -> None:
    ready_certificate("ok-1", issuer)
    soon = ready_certificate("renews-soon", issuer, days_left=33)
    assert soon.renewal_time is not None
    backoff_certificate("failing", issuer, attempts=3)
    inflight = make_certificate("inflight", issuer)
    acme_chain(inflight, issuer)
    pending_request("kubelet-csr", issuer)
    AcmeServer.objects.create(
        directory_url="https://acme.example.test/dir",
        paused_until=timezone.now() + timedelta(minutes=30),
        pause_reason="rateLimited: too many new orders",
    )
    response = client_for("viewer").get("/")
    assert response.status_code == 200
    html = response.content.decode()
    # counts by state
    assert 'data-state="Ready">2<' in html
    assert 'data-state="Failed">1<' in html
    assert 'id="pending-approvals-count">1<' in html
    # scheduler depth: one processing of the cap of 60, none queued
    assert 'id="sched-processing">1<' in html
    assert 'id="sched-cap">60<' in html
    assert 'id="sched-queued">0<' in html
    # the in-flight challenge with its step and reason
    assert "self-check failing" in html
    assert "wrong status code 404" in html
    # backoff with a countdown to nextRetryTime, CA pause, renewal within 7 days
    assert "failing" in html
    assert 'data-countdown="' in html
    assert "rateLimited: too many new orders" in html
    assert "renews-soon" in html
    assert 'data-live-refresh="/partials/dashboard/counts/"' in html
    assert 'data-live-groups="dashboard"' in html
    assert 'id="live-status"' in html
    assert "js/live.js" in html


@pytest.mark.parametrize(
    "section", ["counts", "scheduler", "challenges", "backoff", "renewals", "approvals"]
)
def test_dashboard_partials_render_alone(
    client_for: ClientFor, issuer: Issuer, section: str
) -> None:
    backoff_certificate("failing", issuer)
    response = client_for("viewer").get(reverse("web:dashboard-partial", args=[section]))
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b"<h2>" in response.content


def test_unknown_dashboard_partial_is_404(client_for: ClientFor) -> None:
    assert client_for("viewer").get("/partials/dashboard/nope/").status_code == 404


def test_certificate_list_search_filter_and_paging(client_for: ClientFor, issuer: Issuer) -> None:
    for i in range(60):
        ready_certificate(f"web-{i:02d}", issuer)
    backoff_certificate("api-broken", issuer)
    client = client_for("viewer")

    first = client.get("/certificates/").content.decode()
    assert "web-00" in first
    assert "Page 1 of 2 (61 certificates)" in first
    second = client.get("/certificates/?page=2").content.decode()
    assert "web-59" in second
    assert "web-00<" not in second

    # search by DNS name (search_text), case-insensitive
    found = client.get("/certificates/?q=API-BROKEN.example").content.decode()
    assert "api-broken" in found
    assert "web-01" not in found

    failed = client.get("/certificates/?state=Failed").content.decode()
    assert "api-broken" in failed
    assert "web-01" not in failed

    other = Issuer.objects.create(name="other", kind="selfSigned", spec={"selfSigned": {}})
    make_certificate("elsewhere", other)
    by_issuer = client.get("/certificates/?issuer=other").content.decode()
    assert "elsewhere" in by_issuer
    assert "web-01" not in by_issuer

    partial = client.get("/partials/certificates/?state=Failed")
    assert partial.status_code == 200
    assert b"api-broken" in partial.content
    assert b"<html" not in partial.content


def test_certificate_detail_shows_status_chain_and_timeline(
    client_for: ClientFor, issuer: Issuer
) -> None:
    cert = backoff_certificate("shop", issuer, attempts=2)
    cr, order, _challenge = acme_chain(cert, issuer)
    Event.objects.create(
        kind="Certificate",
        name="shop",
        certificate_name="shop",
        reason="Failed",
        message="The CA refused",
        type="Warning",
    )
    response = client_for("viewer").get("/certificates/shop/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "shop.example.test" in html
    assert cr.name in html
    assert order.name in html
    assert "wrong status code 404" in html  # challenge reason in the chain
    assert "self-check failing" in html  # the challenge's step in the chain
    assert "The CA refused" in html  # timeline
    assert "Presented the HTTP-01 token" in html
    assert 'data-live-groups="certificate:shop"' in html
    assert 'data-live-topics="certificate:shop"' in html
    assert "Next retry" in html
    assert '"secretName": "shop-tls"' in html.replace("&quot;", '"')
    # a viewer gets no buttons
    assert "Force renew" not in html

    for part in ("status", "chain", "timeline"):
        partial = client_for("viewer").get(f"/partials/certificates/shop/{part}/")
        assert partial.status_code == 200
        assert b"<html" not in partial.content
    assert client_for("viewer").get("/partials/certificates/shop/nope/").status_code == 404
    assert client_for("viewer").get("/certificates/missing/").status_code == 404


def test_operator_and_approver_see_their_buttons_only(
    client_for: ClientFor, issuer: Issuer
) -> None:
    ready_certificate("shop", issuer)
    pending_request("csr-1", issuer)
    operator = client_for("operator")
    approver = client_for("approver")
    assert b"Force renew" in operator.get("/certificates/shop/").content
    assert b"Force renew" not in approver.get("/certificates/shop/").content
    assert b"New certificate" in operator.get("/certificates/").content
    assert b"New certificate" not in client_for("viewer").get("/certificates/").content
    assert b">Approve</button>" in approver.get("/requests/").content
    assert b">Approve</button>" not in operator.get("/requests/").content
    assert b">Approve</button>" not in client_for("viewer").get("/requests/").content
    admin = client_for("admin")
    assert b"Force renew" in admin.get("/certificates/shop/").content
    assert b">Approve</button>" in admin.get("/requests/").content


def test_approval_queue_decodes_csr(client_for: ClientFor, issuer: Issuer) -> None:
    pending_request("kubelet-csr", issuer, common_name="system:node:node-1")
    response = client_for("viewer").get("/requests/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "kubelet-csr" in html
    assert "CN=system:node:node-1" in html
    assert "node-1.example.test" in html
    assert "ECDSA 256" in html
    assert "system:node:node-1" in html  # requester
    assert "<dt>Duration</dt><dd>30 days</dd>" in html  # spec.duration 720h, in words


def test_approval_queue_shows_undecodable_csr(client_for: ClientFor, issuer: Issuer) -> None:
    from issuance.models import CertificateRequest

    CertificateRequest.objects.create(name="garbage", issuer=issuer, spec={"request": "nope"})
    html = client_for("viewer").get("/requests/").content.decode()
    assert "garbage" in html
    assert "cannot be decoded" in html


def test_issuers_orders_challenges_pages(client_for: ClientFor, issuer: Issuer) -> None:
    acme = Issuer.objects.create(
        name="letsencrypt",
        kind="acme",
        spec={
            "acme": {
                "server": "https://acme.example.test/dir",
                "solvers": [
                    {"http01": {}},
                    {
                        "selector": {"dnsZones": ["example.test"]},
                        "dns01": {"rfc2136": {"tsigSecret": "s3cr3t-tsig-value"}},
                    },
                ],
            }
        },
        acme_account_uri="https://acme.example.test/acct/42",
    )
    acme.set_condition("Ready", "True", "ACMEAccountRegistered", "registered")
    acme.save()
    cert = make_certificate("shop", acme)
    _, order, challenge = acme_chain(cert, acme)
    client = client_for("viewer")

    # Long tokens carry line-break opportunities (<wbr>, the `breakable` filter) for phones.
    issuers = client.get("/issuers/").content.decode().replace("<wbr>", "")
    assert "https://acme.example.test/acct/42" in issuers
    assert "HTTP-01: default" in issuers
    assert "DNS-01 (rfc2136): dnsZones example.test" in issuers
    assert "selfsigned" in issuers
    assert "s3cr3t-tsig-value" not in issuers  # solver secrets are never shown

    orders = client.get("/orders/").content.decode().replace("<wbr>", "")
    assert order.name in orders
    assert "https://acme.example.test/order/1" in orders
    assert order.name in client.get("/orders/?state=pending").content.decode()
    assert order.name not in client.get("/orders/?state=valid").content.decode()

    challenges = client.get("/challenges/").content.decode()
    assert challenge.dns_name in challenges
    assert "self-check failing" in challenges
    assert challenge.dns_name in client.get("/challenges/?status=processing").content.decode()
    assert challenge.dns_name not in client.get("/challenges/?status=queued").content.decode()
    for url in ("/partials/issuers/", "/partials/orders/", "/partials/challenges/"):
        assert client.get(url).status_code == 200


def test_static_files_are_served(client_for: ClientFor) -> None:
    # WhiteNoise serves /static/ from the finders (no collectstatic), as under uvicorn.
    response = client_for(None).get("/static/css/console.css")
    assert response.status_code == 200
    assert isinstance(response, FileResponse)
    body = b"".join(response.streaming_content)
    assert b".badge" in body


def test_approval_queue_shows_policy_checks(client_for: ClientFor, issuer: Issuer) -> None:
    cr = pending_request("kubelet-csr", issuer)
    type(cr).objects.filter(pk=cr.pk).update(
        policy_checks={
            "outcome": "pending",
            "reason": "a check failed: dnsSanRegex",
            "checks": [
                {"name": "requesterPattern", "passed": True, "detail": "system:node:node-1"},
                {"name": "dnsSanRegex", "passed": False, "detail": "node-1.example.test"},
            ],
        }
    )
    html = client_for("viewer").get("/requests/").content.decode()
    assert "a check failed: dnsSanRegex" in html
    assert '<li class="check-pass">✓ requesterPattern' in html
    assert '<li class="check-fail">✗ dnsSanRegex' in html


def test_certificate_list_backoff_filter(client_for: ClientFor, issuer: Issuer) -> None:
    ready_certificate("fine", issuer)
    backoff_certificate("flaky", issuer)
    html = client_for("viewer").get("/certificates/?backoff=1").content.decode()
    assert "flaky" in html
    assert ">fine<" not in html


def test_not_found_page_with_debug_off(client_for: ClientFor) -> None:
    response = client_for("viewer").get("/certificates/does-not-exist/")
    assert response.status_code == 404
    assert b"There is nothing at this address" in response.content
