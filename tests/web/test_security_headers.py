"""Security headers on every answer, and no inline script or style the CSP would block.

Walks every console page the accessibility sweep visits (tests/browser/seeded_console.PAGES,
over the seeded console), plus the API, its schema and reference, the sign-in page, a 404,
the 503 page while the database is down and the 500 page, with Django's test client
through the real middleware stack. The CSP is asserted as the browser reads it; that pages
work under it is the browser tests' part (tests/browser/test_csp_live.py,
test_api_docs_ui.py).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.test import Client
from django.urls import include, path
from pytest_django import Settings

from tests.browser.seeded_console import PAGES, seed_console
from tests.dbfaults import held_down

ROOT = Path(__file__).resolve().parents[2]

FEATURES_OFF = ("camera=()", "microphone=()", "geolocation=()", "usb=()", "payment=()")


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a view that fails, for the 500 page")


# This module doubles as the URLconf of the 500 test: the console's routes, one view that
# fails, and the console's own error handlers.
urlpatterns = [path("__boom__/", _boom), path("", include("console.urls"))]
handler400 = "console.unavailable.bad_request"
handler500 = "console.unavailable.server_error"


def csp_directives(header: str) -> dict[str, list[str]]:
    directives = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = words[1:]
    return directives


def assert_security_headers(response: HttpResponseBase, where: str) -> None:
    csp = response.headers.get("Content-Security-Policy")
    assert csp, f"{where}: no Content-Security-Policy"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, f"{where}: {csp}"
    directives = csp_directives(csp)
    assert directives["default-src"] == ["'self'"], where
    assert directives["script-src"] == ["'self'"], where
    assert directives["style-src"] == ["'self'"], where
    assert directives["connect-src"] == ["'self'"], where
    assert directives["object-src"] == ["'none'"], where
    assert directives["frame-ancestors"] == ["'none'"], where
    assert response.headers.get("X-Frame-Options") == "DENY", where
    assert response.headers.get("X-Content-Type-Options") == "nosniff", where
    assert response.headers.get("Referrer-Policy") == "same-origin", where
    assert response.headers.get("Cross-Origin-Opener-Policy") == "same-origin", where
    permissions = response.headers.get("Permissions-Policy", "")
    for feature in FEATURES_OFF:
        assert feature in permissions, f"{where}: {feature} not in {permissions!r}"


class InlineFinder(HTMLParser):
    """What a CSP without 'unsafe-inline' blocks in a page's markup."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script" and not names.get("src"):
            self.found.append("inline <script>")
        if tag == "style":
            self.found.append("<style> element")
        for name, value in attrs:
            if name == "style":
                self.found.append(f"style attribute on <{tag}>: {value}")
            if name.startswith("on"):
                self.found.append(f"event handler {name} on <{tag}>")
            if name in {"href", "src", "action"} and (value or "").strip().startswith(
                "javascript:"
            ):
                self.found.append(f"javascript: URL on <{tag}>")


def inline_parts(html: str) -> list[str]:
    finder = InlineFinder()
    finder.feed(html)
    return finder.found


def test_the_inline_finder_sees_what_the_csp_blocks() -> None:
    # The page checks below mean something only if the finder recognises each kind.
    html = (
        '<script>x()</script><script src="/a.js"></script><style>p{}</style>'
        '<p style="color: red" onclick="x()"><a href="javascript:x()">a</a></p>'
    )
    assert len(inline_parts(html)) == 5
    assert inline_parts('<script src="/static/js/live.js" defer></script><p class="x">') == []


@pytest.mark.django_db
def test_every_console_page_sends_the_headers_and_has_nothing_inline(
    role_users: dict[str, User],
) -> None:
    seed_console()
    client = Client()
    client.force_login(role_users["admin"])
    checked = 0
    for name, url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, f"{name} {url}: {response.status_code}"
        assert_security_headers(response, f"{name} {url}")
        if response["Content-Type"].startswith("text/html"):
            parts = inline_parts(response.content.decode())
            assert parts == [], f"{name} {url}: {parts}"
            checked += 1
    assert checked >= len(PAGES) - 2  # a page or two may be a download


@pytest.mark.django_db
def test_api_docs_sign_in_and_not_found_send_the_headers(role_users: dict[str, User]) -> None:
    anonymous = Client()
    signed_in = Client()
    signed_in.force_login(role_users["viewer"])
    answers = {
        "sign-in page": anonymous.get("/login/"),
        "sign-in refused": anonymous.post("/login/", {"username": "viewer", "password": "no"}),
        "redirect to sign-in": anonymous.get("/certificates/"),
        "API list": signed_in.get("/api/v1/certificates/"),
        "API refused": anonymous.get("/api/v1/certificates/"),
        "API schema": anonymous.get("/api/schema/"),
        "API reference": signed_in.get("/api/docs/"),
        "API reference script": signed_in.get("/api/docs/?script"),
        "404 page": signed_in.get("/no/such/page/"),
        "static file": anonymous.get("/static/js/live.js"),
    }
    assert answers["sign-in page"].status_code == 200
    assert answers["redirect to sign-in"].status_code == 302
    assert answers["API list"].status_code == 200
    assert answers["API refused"].status_code in {401, 403}
    assert answers["404 page"].status_code == 404
    for where, response in answers.items():
        assert_security_headers(response, where)
    for where in ("sign-in page", "sign-in refused", "API reference", "404 page"):
        parts = inline_parts(answers[where].content.decode())
        assert parts == [], f"{where}: {parts}"


@pytest.mark.django_db
def test_the_503_page_sends_the_headers(role_users: dict[str, User]) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(role_users["viewer"])
    with held_down():
        page = client.get("/")
        api = client.get("/api/v1/certificates/")
    assert page.status_code == 503 and api.status_code == 503
    assert_security_headers(page, "503 page")
    assert_security_headers(api, "503 API answer")
    assert inline_parts(page.content.decode()) == []
    assert "/static/css/error-page.css" in page.content.decode()


@pytest.mark.django_db
def test_the_500_page_sends_the_headers(settings: Settings) -> None:
    settings.ROOT_URLCONF = __name__
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get("/__boom__/")
    assert response.status_code == 500
    assert "Server error" in response.content.decode()
    assert_security_headers(response, "500 page")
    assert inline_parts(response.content.decode()) == []


def test_no_template_has_inline_script_or_style() -> None:
    # Templates the walk above does not render (error pages, rarely seen states) too.
    offenders = {}
    for template in sorted((ROOT / "console" / "templates").rglob("*.html")):
        parts = inline_parts(template.read_text())
        if parts:
            offenders[str(template.relative_to(ROOT))] = parts
    assert offenders == {}


@pytest.mark.django_db
def test_the_production_profile_redirects_to_https_and_sends_hsts(
    settings: Settings, role_users: dict[str, User]
) -> None:
    # What PRODUCTION=1 with TRUST_PROXY_HEADER=X-Forwarded-Proto sets
    # (tests/test_production_settings.py checks that it does).
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 365 * 24 * 3600
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client()
    plain = client.get("/login/")
    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/login/"
    assert "Strict-Transport-Security" not in plain  # only over HTTPS, as RFC 6797 says
    proxied = client.get("/login/", headers={"X-Forwarded-Proto": "https"})
    assert proxied.status_code == 200
    assert proxied["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert_security_headers(proxied, "sign-in page over HTTPS")
    # CAs fetch HTTP-01 answers over plain HTTP: never redirected.
    challenge = client.get("/.well-known/acme-challenge/no-such-token")
    assert challenge.status_code == 404
