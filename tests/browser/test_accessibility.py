"""Every console page, light and dark, at 1280x800 and 390x844: axe-core finds no serious or
critical violation, nothing scrolls sideways (tables scroll in their own box), screenshots
land in artifacts/screenshots/. And the keyboard alone: skip link, login, a certificate
opened from the list, no trap.

One server and one logged-in page per test, to stay quick. Every finding (all impacts) is
also written to artifacts/a11y-report.json."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string

from issuance.models import Issuer
from tests.browser.a11y import (
    DESKTOP,
    FAILING_IMPACTS,
    PHONE,
    ROOT,
    assert_accessible,
    assert_no_horizontal_overflow,
    axe_violations,
    format_violations,
    screenshots,
)
from tests.browser.pages import login
from tests.factories import make_acme_issuer, make_selfsigned_issuer
from tests.web.builders import acme_chain, backoff_certificate, pending_request, ready_certificate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]

# (screenshot name, path) of every page an admin sees; the login, 403 and standalone error
# pages are checked on their own below.
PAGES = [
    ("dashboard", "/"),
    ("certificates", "/certificates/"),
    ("certificate-detail", "/certificates/web/"),
    ("certificate-new", "/new-certificate/"),
    ("certificate-revoke", "/certificates/web/revoke/"),
    ("issuers", "/issuers/"),
    ("requests", "/requests/"),
    ("orders", "/orders/"),
    ("challenges", "/challenges/"),
    ("not-found", "/certificates/no-such-certificate/"),
]


@pytest.fixture
def console_data(db: None) -> None:
    """Something on every page: a ready certificate, one in backoff, one waiting for approval,
    an ACME request → order → challenge chain. Made directly (the worker may move them on;
    the pages are checked as they are then)."""
    selfsigned = make_selfsigned_issuer("selfsigned")
    manual = make_selfsigned_issuer("manual", approvalPolicy={"autoApprove": "none"})
    acme = make_acme_issuer("letsencrypt-staging", server="https://acme.example.test/directory")
    ready_certificate("web", selfsigned)
    backoff_certificate("flaky", selfsigned, attempts=3)
    cert = ready_certificate("shop-with-a-rather-long-name", acme, days_left=5)
    acme_chain(cert, acme)
    pending_request("node-1-csr", Issuer.objects.get(pk=manual.pk))


class Findings:
    """Every axe finding across pages, kept for the report; the failing ones for the test."""

    def __init__(self) -> None:
        self.report: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def check(self, page: Any, name: str, *, phone_layout: bool = True) -> None:
        """`page` as it is now, in both colour schemes and both sizes; then screenshots."""
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
                page.set_viewport_size(size)
                found = axe_violations(page)
                where = f"{name} ({scheme}, {label})"
                self.report.extend({"page": where, **v} for v in found)
                failing = [v for v in found if v["impact"] in FAILING_IMPACTS]
                if failing:
                    self.failures.append(f"{where}:\n{format_violations(failing)}")
                if label == "phone" and phone_layout:
                    try:
                        assert_no_horizontal_overflow(page)
                    except AssertionError as exc:
                        self.failures.append(f"{where}: {exc}")
            screenshots(page, name if scheme == "light" else f"{name}-dark")
        page.emulate_media(color_scheme="light")

    def finish(self) -> None:
        counts = Counter(str(v["impact"]) for v in self.report)
        out = ROOT / "artifacts" / "a11y-report.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"counts": counts, "violations": self.report}, indent=1))
        assert not self.failures, "\n\n".join(self.failures)


def test_every_page_accessible_in_both_schemes_and_sizes(
    new_page: NewPage, role_users: dict[str, User], console_data: None
) -> None:
    findings = Findings()
    page = new_page()

    page.goto("/login/")
    findings.check(page, "login")
    login(page, "admin")
    for name, path in PAGES:
        response = page.goto(path)
        assert response is not None
        assert response.status == (404 if name == "not-found" else 200), path
        page.wait_for_load_state("load")
        findings.check(page, name)

    # 403: a viewer asking for an operator's page.
    page.click("text=Log out")
    page.wait_for_url(re.compile(r"/login/"))
    login(page, "viewer")
    response = page.goto("/new-certificate/")
    assert response is not None and response.status == 403
    findings.check(page, "forbidden")

    # The standalone pages rendered without the app's stylesheet (database down, crash).
    for name, template in (("unavailable", "503.html"), ("server-error", "500.html")):
        page.set_content(render_to_string(template, {"reload": None}))
        findings.check(page, name)

    findings.finish()


def _focused(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """() => {
              const el = document.activeElement;
              const style = getComputedStyle(el);
              return {tag: el.tagName, id: el.id, href: el.getAttribute("href") || "",
                text: (el.textContent || "").trim().slice(0, 60),
                outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
                inView: el.getBoundingClientRect().top >= 0};
            }"""
        )
    )


def test_keyboard_only(new_page: NewPage, role_users: dict[str, User], console_data: None) -> None:
    page = new_page()
    page.set_viewport_size(PHONE)  # the small screen, where the nav wraps

    # Log in with the keyboard: the username field has the focus (autofocus), then Tab.
    page.goto("/login/")
    assert _focused(page)["id"] == "id_username"
    page.keyboard.type("operator")
    page.keyboard.press("Tab")
    page.keyboard.type("pw-operator")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"^http://[^/]+/$"))  # the dashboard

    page.goto("/certificates/")
    # The skip link comes first, shown when focused, and moves focus past the navigation to
    # the page's main content.
    page.keyboard.press("Tab")
    first = _focused(page)
    assert first["text"] == "Skip to content" and first["inView"] and first["outline"], first
    assert page.locator(".skip-link").is_visible()
    page.keyboard.press("Enter")
    assert _focused(page)["id"] == "main"
    # On to the first certificate's link in the table, every stop visibly focused.
    for _ in range(25):
        page.keyboard.press("Tab")
        now = _focused(page)
        assert now["outline"], f"no visible focus on {now}"
        if now["href"].startswith("/certificates/") and now["href"] != "/certificates/":
            break
    else:
        pytest.fail("no certificate link reached with Tab")
    target = now["href"]
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(re.escape(target) + "$"))
    assert page.locator("h1").inner_text().endswith(target.strip("/").split("/")[-1])

    # No trap: Tab from the top of the detail page (buttons, forms, live parts) walks every
    # stop and comes back round to the skip link.
    page.keyboard.press("Tab")
    assert _focused(page)["text"] == "Skip to content"
    stops = 0
    while True:
        page.keyboard.press("Tab")
        stops += 1
        if _focused(page)["text"] == "Skip to content":
            break
        assert stops < 80, "Tab never came back to the skip link: a keyboard trap?"
    assert stops > 8  # nav, renew, revoke, ... were on the way

    # Forms work from the keyboard too: the search box, submitted with Enter.
    page.goto("/certificates/")
    page.keyboard.press("Tab")
    for _ in range(15):
        page.keyboard.press("Tab")
        if _focused(page)["tag"] == "INPUT":
            break
    assert page.evaluate("document.activeElement.name") == "q"
    page.keyboard.type("flaky")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"\?q=flaky"))
    assert page.locator("tr[data-certificate]").count() == 1


BAD_PAGE = """<!DOCTYPE html><html lang="en"><head><title>bad</title></head><body><main>
<h1>Bad</h1><p style="color:#bbb;background:#fff">faint text</p><img src="x.png">
<div style="width:900px">too wide</div><table><tr><td>bare table</td></tr></table>
</main></body></html>"""


def test_checks_catch_what_they_look_for(new_page: Callable[..., Any]) -> None:
    """The harness fails on a page with known faults (so a silent axe cannot pass a page)."""
    page = new_page(base_url="http://127.0.0.1:9")  # no server: the page is set directly
    page.set_viewport_size(PHONE)
    page.set_content(BAD_PAGE)
    with pytest.raises(AssertionError) as axe_error:
        assert_accessible(page)
    assert "color-contrast" in str(axe_error.value) and "image-alt" in str(axe_error.value)
    with pytest.raises(AssertionError, match="scrolls sideways"):
        assert_no_horizontal_overflow(page)
    page.evaluate("document.querySelector('div').remove()")
    with pytest.raises(AssertionError, match="tables outside a scroll box"):
        assert_no_horizontal_overflow(page)
