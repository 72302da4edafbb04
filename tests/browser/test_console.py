"""The console in a real Chromium against the real app (web + worker, one process)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from issuance.models import AcmeServer, Approval, Certificate, CertificateRequest, Event, Issuer
from issuance.specs.certificate import apply_certificate
from issuance.specs.issuer import apply_issuer
from tests.browser.pages import login
from tests.helpers import wait_for
from tests.web.builders import backoff_certificate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]
Shot = Callable[[Any, str], Any]


@pytest.fixture(autouse=True)
def app(server: str) -> str:
    """Every test here runs against the app with default settings, started up front."""
    return server


@pytest.fixture
def issuers(db: None) -> None:
    apply_issuer("selfsigned", {"selfSigned": {}}, actor="test")
    # Every request of this issuer waits for a person, even our own certificates'.
    apply_issuer(
        "manual", {"selfSigned": {}, "approvalPolicy": {"autoApprove": "none"}}, actor="test"
    )


def test_login_and_dashboard(
    new_page: NewPage, screenshot: Shot, role_users: dict[str, User], issuers: None
) -> None:
    page = new_page()
    page.goto("/")
    assert "/login/" in page.url  # anonymous → login
    page.fill("input[name=username]", "viewer")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").is_visible()
    login(page, "viewer")
    assert page.locator("h1").inner_text() == "Dashboard"
    assert page.locator("#sched-cap").inner_text() == "60"
    # live.js connects the WebSocket (served by the same process) and says so.
    page.locator("#live-status[data-state=live]").wait_for()

    # Something to show: a certificate in failure backoff and a paused CA.
    backoff_certificate("flaky", Issuer.objects.get(name="selfsigned"), attempts=3)
    AcmeServer.objects.create(
        directory_url="https://acme.example.test/dir",
        paused_until=timezone.now() + timedelta(minutes=20),
        pause_reason="rateLimited: too many new orders",
    )
    page.reload()
    countdown = page.locator("#dash-backoff time[data-countdown]")
    first = countdown.inner_text()
    assert first.startswith("in 3h")
    # live.js ticks it locally, without asking the server. It shows hours and minutes, so
    # the text changes at the latest when the minute turns (sooner when the page's first tick
    # rounds the remaining seconds differently from the server's rendering).
    page.wait_for_function(
        "t => document.querySelector('#dash-backoff time[data-countdown]').textContent !== t",
        arg=first,
        timeout=65_000,
    )
    assert "rateLimited" in page.locator("#dash-scheduler").inner_text()
    # the CSS and JS are served by the app itself (DEBUG off, WhiteNoise)
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).display") == "flex"
    screenshot(page, "dashboard")
    page.click("text=Log out")
    page.wait_for_url(re.compile(r"/login/"))


def test_certificate_lifecycle_live(
    new_page: NewPage, screenshot: Shot, role_users: dict[str, User], issuers: None
) -> None:
    page = new_page()
    login(page, "operator")
    page.click("text=Certificates")
    page.click("text=New certificate")
    page.fill("input[name=name]", "shop")
    page.select_option("select[name=issuer]", "selfsigned")
    page.fill("textarea[name=dns_names]", "shop.example.test\nwww.shop.example.test")
    page.click("#new-certificate button[type=submit]")
    page.wait_for_url(re.compile(r"/certificates/shop/$"))
    assert "Certificate shop created." in page.locator(".messages").inner_text()

    # No reload from here on: the page follows the worker through live updates.
    page.evaluate("window.__sameDocument = true")
    status = page.locator("#certificate-status")
    status.locator(".badge", has_text="Ready").first.wait_for(timeout=45_000)
    assert "Certificate is up to date and has not expired" in status.inner_text()
    assert "shop.example.test, www.shop.example.test" in status.inner_text()
    page.locator("#certificate-timeline", has_text="Issued").wait_for(timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True
    screenshot(page, "ready")

    # Force renew: confirm() is accepted by the page fixture; the POST redirects back here.
    page.click("#force-renew")
    page.wait_for_url(re.compile(r"/certificates/shop/$"))
    assert "Renewal of shop requested." in page.locator(".messages").inner_text()
    timeline = page.locator("#certificate-timeline")
    timeline.locator("li", has_text="ManuallyTriggered").wait_for()
    assert "by operator" in timeline.inner_text()
    # The second issuance shows up live: another Issuing event, then revision 2.
    page.evaluate("window.__sameDocument = true")
    page.wait_for_function(
        # A function, not an expression: an expression is eval'ed in the page, which the
        # console's CSP (no 'unsafe-eval') refuses.
        "() => document.querySelectorAll('#certificate-timeline .event-reason').length > 0 &&"
        " [...document.querySelectorAll('#certificate-timeline .event-reason')]"
        ".filter(e => e.textContent.trim() === 'Issuing').length >= 2",
        timeout=45_000,
    )
    wait_for(lambda: Certificate.objects.get(name="shop").revision == 2, 45, "revision 2")
    page.locator("#certificate-status dd", has_text=re.compile(r"^2$")).wait_for(timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True
    page.locator("#certificate-chain", has_text="shop-2").wait_for(timeout=15_000)
    event = Event.objects.get(certificate_name="shop", reason="ManuallyTriggered")
    assert event.actor == "operator"
    screenshot(page, "renewed")


def test_approve_from_queue_and_issuing_while_waiting(
    new_page: NewPage, screenshot: Shot, role_users: dict[str, User], issuers: None
) -> None:
    apply_certificate(
        "vault",
        {
            "secretName": "vault-tls",
            "dnsNames": ["vault.example.test"],
            "issuerRef": {"name": "manual"},
        },
        actor="test",
    )
    wait_for(
        lambda: CertificateRequest.objects.filter(certificate__name="vault").exists(), 45, "request"
    )

    operator = new_page()
    login(operator, "operator")
    operator.goto("/certificates/vault/")
    # Issuing stays up while the request waits for a person.
    operator.locator("#certificate-status .badge", has_text="Issuing").first.wait_for()
    screenshot(operator, "issuing-waiting")

    approver = new_page()
    login(approver, "approver")
    approver.click("text=Approvals")
    card = approver.locator("article.request", has_text="vault")
    card.wait_for()
    assert "vault.example.test" in card.inner_text()  # decoded from the CSR
    assert "ECDSA" in card.inner_text() or "RSA" in card.inner_text()
    screenshot(approver, "queue")
    card.locator("input[name=reason]").first.fill("Checked")
    card.locator("input[name=message]").first.fill("vault owner confirmed")
    card.locator("button.approve").click()
    approver.wait_for_url(re.compile(r"/requests/$"))
    assert "approved" in approver.locator(".messages").inner_text()
    cr = CertificateRequest.objects.get(certificate__name="vault")
    assert cr.approval == Approval.APPROVED
    assert cr.decided_by == "approver"
    approved = cr.get_condition("Approved")
    assert approved is not None
    assert approved["reason"] == "Checked"

    # The operator's open page turns Ready by itself.
    operator.locator("#certificate-status .badge", has_text="Ready").first.wait_for(timeout=45_000)
    # The timeline is a live section of its own: it may follow the status a moment later.
    operator.locator("#certificate-timeline", has_text="by approver").wait_for(timeout=30_000)
    screenshot(operator, "ready-after-approval")

    # Force renew: the new request waits for a person again, so Issuing stays visible.
    operator.click("#force-renew")
    operator.wait_for_url(re.compile(r"/certificates/vault/$"))
    operator.locator("#certificate-status .badge", has_text="Issuing").first.wait_for(
        timeout=30_000
    )
    operator.locator("#certificate-chain", has_text="vault-2").wait_for(timeout=30_000)
    # The timeline is its own live section: it may arrive after the chain.
    operator.locator(
        "#certificate-timeline", has_text="re-issuance manually triggered by operator"
    ).wait_for(timeout=30_000)
    screenshot(operator, "issuing-after-force-renew")


def test_viewer_sees_no_action_buttons(
    new_page: NewPage, screenshot: Shot, role_users: dict[str, User], issuers: None
) -> None:
    apply_certificate(
        "vault",
        {
            "secretName": "vault-tls",
            "dnsNames": ["vault.example.test"],
            "issuerRef": {"name": "manual"},
        },
        actor="test",
    )
    wait_for(
        lambda: CertificateRequest.objects.filter(certificate__name="vault").exists(), 45, "request"
    )
    page = new_page()
    login(page, "viewer")
    page.goto("/certificates/")
    assert page.locator("text=New certificate").count() == 0
    page.goto("/certificates/vault/")
    assert page.locator("#force-renew").count() == 0
    page.goto("/requests/")
    page.locator("article.request", has_text="vault").wait_for()
    assert page.locator("button.approve").count() == 0
    assert page.locator("button.deny").count() == 0
    screenshot(page, "viewer-queue")
    # A crafted POST is refused by the server, whatever the page shows.
    status = page.evaluate(
        """async () => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const r = await fetch('/certificates/vault/renew/', {method: 'POST',
              headers: {'X-CSRFToken': token}});
            return r.status;
        }"""
    )
    assert status == 403
