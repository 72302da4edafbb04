"""Every page an admin reaches, over a console seeded with every state its cards and lists
can show (tests/browser/seeded_console.py), light and dark, at 1280x800 and 390x844: axe-core
finds no moderate, serious or critical violation, nothing scrolls sideways (tables scroll in
their own box), screenshots of what fails land in artifacts/screenshots/ (of every page with
A11Y_SCREENSHOTS=all). Every finding (minor ones too) is
written to artifacts/a11y-report.json. And the keyboard alone: skip link, login, a
certificate opened from the list, no trap.

What is checked is fixed before it is checked: the sweep's server runs no worker
(`manage.py serve --no-worker`), so nothing reconciles, retries, sends or syncs the seeded rows
while the pages are read (a worker would issue the certificates, time the challenges out,
approve or fail requests, deliver notifications and mark the clusters unreachable). One server
and one logged-in page per test, to stay quick."""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.urls import URLPattern, resolve

from console import urls as root_urls
from console.web import urls as web_urls
from tests.browser.a11y import (
    ARTIFACTS,
    DESKTOP,
    FAILING_IMPACTS,
    PHONE,
    RENDERING_RULES,
    assert_accessible,
    assert_no_horizontal_overflow,
    axe_violations,
    format_violations,
    shoot,
)
from tests.browser.pages import login
from tests.browser.seeded_console import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

NewPage = Callable[..., Any]

# Console routes that are not pages of their own, and why; every other route must be in
# PAGES (test_every_console_page_is_swept).
NOT_PAGES = {
    "logout": "POST only (the button in the top bar)",
    "dashboard-partial": "a fragment of the dashboard, checked inside it",
    "certificates-partial": "a fragment of the certificate list, checked inside it",
    "certificate-partial": "a fragment of the certificate page, checked inside it",
    "certificate-renew": "POST only (Force renew)",
    "certificate-endpoint-add": "POST only (the Endpoints card's form, on the certificate page)",
    "certificate-endpoint-remove": "POST only (Remove on the Endpoints card)",
    "certificate-endpoint-check": "POST only (Check now)",
    "certificate-download-revoke": "POST only",
    "certificate-file": "a file download (PEM), not a page",
    "certificate-key-pem": "POST only, a file download",
    "certificate-key-p12": "POST only, a file download (its errors: a form state below)",
    "issuer-file": "a file download (PEM), not a page",
    "bulk-start": "POST only (the list's bulk bar)",
    "bulk-step": "POST only (the bulk page's script and Continue button)",
    "bulk-partial": "a fragment of the bulk page, checked inside it",
    "request-approve": "POST only",
    "request-deny": "POST only",
    "requests-partial": "a fragment of the approval queue, checked inside it",
    "issuers-partial": "a fragment of the issuers page, checked inside it",
    "issuer-test-dns": "POST only (Test DNS on the issuers page)",
    "issuer-directory": "POST only (the issuer form's script asks for a directory)",
    "orders-partial": "a fragment of the orders page, checked inside it",
    "challenges-partial": "a fragment of the challenges page, checked inside it",
    "issuer-policy-preview": "POST only (the policy editor's preview, checked on its page)",
    "audit-export": "a CSV download, not a page",
    "cluster-rbac": "a YAML file served as text, not a page",
    "user-create": "POST only (answers with the users page)",
    "user-roles": "POST only",
    "user-scopes": "POST only",
    "user-disable": "POST only",
    "user-enable": "POST only",
    "signin-lock-lift": "POST only (Lift on the sign-in locks page)",
    "token-create": "POST only (answers with the tokens page)",
    "token-revoke": "POST only",
    "webhook-create": "POST only (answers with the webhooks page)",
    "webhook-delete": "POST only",
    "webhook-test": "POST only",
    "channel-create": "POST only (answers with the notifications page)",
    "channel-test": "POST only",
    "channel-toggle": "POST only",
    "channel-delete": "POST only",
    "rule-create": "POST only (answers with the notifications page)",
    "rule-delete": "POST only",
    "clusters-partial": "a fragment of the clusters page, checked inside it",
    "cluster-contexts": "POST only, JSON for the cluster form's script",
    "cluster-detail-partial": "a fragment of the cluster page, checked inside it",
    "cluster-check": "POST only (Check now)",
    "mirrored-renew": "POST only",
    "mirrored-approve": "POST only",
    "mirrored-deny": "POST only",
    "mirrored-certificate-partial": "a fragment of the mirrored certificate page",
    "mirrored-request-partial": "a fragment of the mirrored request page",
    "login": "checked on its own (before logging in), with and without an error",
    "oidc-login": "a redirect to the OpenID Provider; its pages are checked in test_sso_ui.py",
    "oidc-callback": "the provider's answer; its refusal page is checked in test_sso_ui.py",
    # A sign-in's steps (console/signin_steps.py), reached in a session that owes them:
    # tests/browser/test_two_factor_ui.py holds each to check_page (axe in both schemes, no
    # sideways scrolling at 390 px), with and without an error.
    "signin-verify": "the code page of a sign-in (test_two_factor_ui.py)",
    "two-factor-setup": "reached while a factor is not set up (test_two_factor_ui.py)",
    "two-factor-qr": "an SVG image on the set-up page, not a page",
    "recovery-codes": "shown once after a set-up (test_two_factor_ui.py)",
    "recovery-codes-new": "POST only (answers with the recovery codes, once)",
    "user-password-reset": "POST only (redirects to the users page, which shows the password once)",
    "user-two-factor-reset": "POST only",
}


# Pages whose script renders their content after loading: checked once this is there.
# Swagger UI fetches the whole schema (112 operations; 0.6 s to serve on an idle machine)
# and builds its page in the browser: on a CI machine running both test passes at once,
# that once took longer than the pages' 15 s default.
SCRIPT_RENDER_TIMEOUT_MS = 90_000
RENDERED_BY_SCRIPT = {
    "api-docs": "#operations-tag-certificates",  # Swagger UI, once it has fetched the schema
}


def console_routes() -> set[str]:
    """The console's pages and actions: every named route of console/web/urls.py, and the
    console's views routed in console/urls.py (the API reference, /api/docs/, sits there,
    before the API's routes, whose last one answers 404 for any other /api/ path)."""
    routes = {p.name for p in web_urls.urlpatterns if isinstance(p, URLPattern) and p.name}
    for p in root_urls.urlpatterns:
        if isinstance(p, URLPattern) and p.name and p.callback.__module__.startswith("console.web"):
            routes.add(p.name)
    return routes


# States only a POST reaches, checked after PAGES (they add rows): forms answered with their
# errors (sent with the browser's own checks off, as a script or an older browser may) and
# pages showing a secret once. (name, page, form, {field: value}, what the answer shows.)
FORM_STATES: tuple[tuple[str, str, str, dict[str, str], str], ...] = (
    (
        "certificate-new-errors",
        "/new-certificate/",
        "#new-certificate",
        {"name": "Not A Name!", "dns_names": "not a dns name"},
        ".errorlist",
    ),
    ("issuer-new-errors", "/new-issuer/", "#issuer-form", {"name": "Bad Name!"}, ".errorlist"),
    (
        "cluster-add-errors",
        "/new-cluster/",
        "#cluster-form",
        {"name": "Bad Name!", "kubeconfig": "not: [a kubeconfig"},
        ".errorlist",
    ),
    (
        "users-create-errors",
        "/users/",
        "#new-user",
        {"username": "no spaces allowed"},
        ".errorlist",
    ),
    (
        "webhooks-create-errors",
        "/webhooks/",
        "#new-webhook-form",
        {"name": "Bad Name!", "url": "ftp://files.example.test/"},
        ".errorlist",
    ),
    ("notifications-channel-errors", "/notifications/", "#new-channel-form", {}, ".errorlist"),
    (
        "download-token-errors",
        "/certificates/web/downloads/",
        "#new-download-token-form",
        {"name": ""},
        ".errorlist",
    ),
    (
        "certificate-key-pkcs12-errors",
        "/certificates/web/files/key/",
        "#pkcs12-form",
        {"password": "short", "confirm": "other"},
        ".errorlist",
    ),
    (
        "password-change-errors",
        "/account/password/",
        "#password-change",
        {"old_password": "pw-admin", "new_password1": "short", "new_password2": "other"},
        ".errorlist",
    ),
    ("tokens-created", "/account/tokens/", "#new-token-form", {"name": "sweep"}, ".secret-once"),
    ("users-created", "/users/", "#new-user", {"username": "new-operator"}, ".secret-once"),
    (
        "webhooks-created",
        "/webhooks/",
        "#new-webhook-form",
        {"name": "sweep-hook", "url": "https://hooks.example.test/issued"},
        ".secret-once",
    ),
    (
        "download-token-created",
        "/certificates/web/downloads/",
        "#new-download-token-form",
        {"name": "sweep-host"},
        ".secret-once",
    ),
)

_SUBMIT = """(selector) => {
  const form = document.querySelector(selector);
  form.noValidate = true;
  form.requestSubmit();
}"""


# Screenshots of every page in both schemes and sizes, to look the console over by eye:
# A11Y_SCREENSHOTS=all. By default only the failing ones are taken: the 260 full-page PNGs
# were 40 % of the sweep's time (81 of 205 s on a loaded CI machine).
EVERY_SCREENSHOT = os.environ.get("A11Y_SCREENSHOTS") == "all"


class Findings:
    """Every axe finding across pages, kept for the report; the failing ones for the test."""

    def __init__(self) -> None:
        self.report: list[dict[str, Any]] = []
        self.failures: list[str] = []
        # Seconds spent per step, in the report: where the sweep's time goes.
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.page_seconds: dict[str, float] = {}

    def check(self, page: Any, name: str) -> None:
        """`page` as it is now, in both colour schemes and both sizes, with a full-page
        screenshot (artifacts/screenshots/<name>[-dark]-<desktop|phone>.png) of each that
        fails, or of every one with A11Y_SCREENSHOTS=all.

        Every axe rule runs at the first size and scheme; at the three others, the rules that
        read the rendering (a11y.RENDERING_RULES): the others' outcome cannot change, and
        running them four times made the sweep four times as long."""
        started_page = time.monotonic()
        # What a closed <details> holds (the charts' data tables) is hidden from axe.
        page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        first = True
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
                page.set_viewport_size(size)
                started = time.monotonic()
                found = axe_violations(page, rules=() if first else RENDERING_RULES)
                first = False
                self.seconds["axe"] += time.monotonic() - started
                where = f"{name} ({scheme}, {label})"
                self.report.extend({"page": where, **v} for v in found)
                failing = [v for v in found if v["impact"] in FAILING_IMPACTS]
                if failing:
                    self.failures.append(f"{where}:\n{format_violations(failing)}")
                if label == "phone":
                    try:
                        assert_no_horizontal_overflow(page)
                    except AssertionError as exc:
                        self.failures.append(f"{where}: {exc}")
                if failing or EVERY_SCREENSHOT:
                    started = time.monotonic()
                    shoot(page, f"{name}-dark" if scheme == "dark" else name, label)
                    self.seconds["screenshots"] += time.monotonic() - started
        page.emulate_media(color_scheme="light")
        self.page_seconds[name] = round(time.monotonic() - started_page, 1)

    def finish(self) -> None:
        counts = Counter(str(v["impact"]) for v in self.report)
        out = ARTIFACTS / "a11y-report.json"
        out.parent.mkdir(exist_ok=True)
        seconds = {step: round(total, 1) for step, total in self.seconds.items()}
        report = {
            "counts": counts,
            "seconds": {**seconds, "pages": self.page_seconds},
            "violations": self.report,
        }
        out.write_text(json.dumps(report, indent=1))
        assert not self.failures, "\n\n".join(self.failures)


def test_every_console_page_is_swept() -> None:
    """Every console route (console_routes) is a page in PAGES or says why it is not one: a
    new page (with or without parameters) is not left out of the sweep unnoticed."""
    swept = {str(resolve(path.split("?")[0]).url_name) for _, path in PAGES}
    routes = console_routes()
    assert "api-docs" in routes  # the reader of console/urls.py finds the views routed there
    missing = sorted(routes - swept - NOT_PAGES.keys())
    assert not missing, f"console pages missing from the sweep (seeded_console.PAGES): {missing}"
    stale = sorted(NOT_PAGES.keys() - routes)
    assert not stale, f"NOT_PAGES names no route: {stale}"
    both = sorted(swept & NOT_PAGES.keys())
    assert not both, f"in PAGES and NOT_PAGES: {both}"
    names = [name for name, _ in PAGES]
    assert len(names) == len(set(names)), "two pages share a screenshot name"


def test_every_page_accessible_in_both_schemes_and_sizes(
    new_page: NewPage, quiet_server: str, seeded: None
) -> None:
    findings = Findings()
    page = new_page(base_url=quiet_server)

    page.goto("/login/")
    findings.check(page, "login")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "not-the-password")
    page.click("button[type=submit]")
    page.wait_for_selector(".errorlist, .error")
    findings.check(page, "login-error")
    login(page, "admin")
    for name, path in PAGES:
        response = page.goto(path)
        assert response is not None
        assert response.status == 200, f"{name}: {path} answered {response.status}"
        if name in RENDERED_BY_SCRIPT:
            page.wait_for_selector(RENDERED_BY_SCRIPT[name], timeout=SCRIPT_RENDER_TIMEOUT_MS)
        findings.check(page, name)
    for name, path, form, fields, shown in FORM_STATES:
        page.goto(path)
        for field, value in fields.items():
            page.locator(f"{form} [name={field}]").fill(value)
        with page.expect_navigation():
            page.evaluate(_SUBMIT, form)
        assert page.locator(shown).count(), f"{name}: no {shown} after submitting {form}"
        findings.check(page, name)
    response = page.goto("/certificates/no-such-certificate/")
    assert response is not None and response.status == 404
    findings.check(page, "not-found")

    # 403: a viewer asking for an operator's page.
    viewer = new_page(base_url=quiet_server)
    login(viewer, "viewer")
    response = viewer.goto("/new-certificate/")
    assert response is not None and response.status == 403
    findings.check(viewer, "forbidden")

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


def test_keyboard_only(new_page: NewPage, quiet_server: str, seeded: None) -> None:
    page = new_page(base_url=quiet_server)
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
    # Past the skip link, the brand, the navigation and the top bar's user links.
    for _ in range(20):
        page.keyboard.press("Tab")
        if _focused(page)["tag"] == "INPUT":
            break
    assert page.evaluate("document.activeElement.name") == "q"
    page.keyboard.type("renewing-now")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"\?q=renewing-now"))
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
