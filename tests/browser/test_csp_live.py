"""Live updates under the console's Content-Security-Policy, in Chromium against `manage.py
serve` (web + worker): the WebSocket connects under `connect-src 'self'` (same-origin ws:),
a certificate issued by the worker appears on an open page through it, with no reload, no
polling, no CSP violation and no console error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.specs.certificate import apply_certificate
from issuance.specs.issuer import apply_issuer
from tests.browser.pages import RECORD_VIOLATIONS, login

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_a_live_update_arrives_under_the_csp(
    new_page: Callable[..., Any], role_users: dict[str, User]
) -> None:
    apply_issuer("selfsigned", {"selfSigned": {}}, actor="test")
    page = new_page()
    errors: list[str] = []
    page.on(
        "console",
        lambda m: errors.append(f"{m.text} ({m.location['url']})") if m.type == "error" else None,
    )
    frames: list[str] = []
    # A lambda, not frames.append: Playwright's event handlers must be Python functions.
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(f)))  # noqa: PLW0108
    page.add_init_script(RECORD_VIOLATIONS)

    login(page, "operator")
    answer = page.request.get("/")
    csp = answer.headers["content-security-policy"]
    assert "connect-src 'self'" in csp and "unsafe-inline" not in csp

    # The scheduler meter is an SVG whose width is an attribute, not a blocked style.
    assert page.locator("#dash-scheduler svg.meter rect").count() == 1

    apply_certificate(
        "csp-live",
        {
            "secretName": "csp-live-tls",
            "dnsNames": ["csp.example.test"],
            "issuerRef": {"name": "selfsigned"},
        },
        actor="test",
    )
    page.goto("/certificates/csp-live/")
    page.locator("#live-status[data-state=live]").wait_for()
    assert page.evaluate("IssuanceLive.state()")["connected"] is True
    page.evaluate("window.__sameDocument = true")
    page.locator("#certificate-status .badge", has_text="Ready").first.wait_for(timeout=45_000)
    # Brought by the socket, not a reload or the polling fallback.
    assert page.evaluate("window.__sameDocument") is True
    state = page.evaluate("IssuanceLive.state()")
    assert state["connected"] is True and state["polling"] is False
    assert frames, "no WebSocket message arrived"

    assert page.evaluate("window.cspViolations") == []
    assert errors == []
