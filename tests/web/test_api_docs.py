"""The API reference at /api/docs/ (console/web/api_docs.py): who gets it, that it loads only
our own static files and scripts, that they are served, that the navigation links to it, and
that a call made from it with the session passes the CSRF check."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.http import FileResponse
from django.test import Client

from issuance.models import ApiToken

ClientFor = Callable[[str | None], Client]

pytestmark = pytest.mark.django_db


class Assets(HTMLParser):
    """What a page makes the browser load or run: scripts, stylesheets, inline code."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.stylesheets: list[str] = []
        self.inline: list[str] = []  # inline <script>/<style> bodies and style attributes
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("style") is not None:
            self.inline.append(f"style attribute on <{tag}>")
        if tag == "script":
            if found.get("src"):
                self.scripts.append(str(found["src"]))
            else:
                self._in = "script"
        elif tag == "style":
            self._in = "style"
        elif tag == "link" and found.get("rel") in ("stylesheet", "icon", "preload"):
            self.stylesheets.append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.inline.append(f"<{self._in}>{data.strip()[:60]}")


def assets_of(html: str) -> Assets:
    parser = Assets()
    parser.feed(html)
    return parser


def body_of(response: object) -> bytes:
    if isinstance(response, FileResponse):
        return b"".join(response.streaming_content)  # type: ignore[arg-type]
    return bytes(response.content)  # type: ignore[attr-defined]


def test_signed_in_user_gets_the_reference_in_the_console(client_for: ClientFor) -> None:
    response = client_for("viewer").get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div id="swagger-ui"' in html
    assert '<nav class="mainnav"' in html
    assert '<a href="/api/docs/" aria-current="page">API</a>' in html
    # A page of its own, not one that subscribes to live updates.
    assert "live.js" not in html and "data-live-groups" not in html


@pytest.mark.parametrize("role", ["viewer", "admin", "nobody"])
def test_every_signed_in_user_has_the_link_in_the_navigation(
    client_for: ClientFor, role: str
) -> None:
    html = client_for(role).get("/account/tokens/").content.decode()
    nav = html[html.index('<nav class="mainnav"') : html.index("</nav>")]
    assert '<a href="/api/docs/">API</a>' in nav


def test_anonymous_user_gets_what_the_schema_gives_them(client_for: ClientFor) -> None:
    """The same rule as /api/schema/ (drf-spectacular's SERVE_PERMISSIONS): anyone may read
    the schema, so anyone may read the reference; trying calls needs a sign-in or a token."""
    anonymous = client_for(None)
    assert anonymous.get("/api/schema/").status_code == 200
    response = anonymous.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div id="swagger-ui"' in html
    assert "mainnav" not in html  # no console navigation without a session
    assert 'href="/login/?next=/api/docs/"' in html
    # Calls made from the page are the API's own: refused without credentials.
    assert anonymous.get("/api/v1/certificates/").status_code in (401, 403)


def test_page_loads_only_same_origin_files_and_no_inline_code(client_for: ClientFor) -> None:
    """Swagger UI comes from drf-spectacular-sidecar as our static files, and its starting
    script from this view (`?script`): nothing from another host, nothing inline, so the page
    works under a Content-Security-Policy of `script-src 'self'` (issue 23)."""
    html = client_for("viewer").get("/api/docs/").content.decode()
    assets = assets_of(html)
    assert not assets.inline, assets.inline
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in assets.scripts
    assert "/api/docs/?script=" in assets.scripts
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css" in assets.stylesheets
    for url in assets.scripts + assets.stylesheets:
        assert url.startswith("/") and not url.startswith("//"), url
    assert "https://" not in "".join(re.findall(r'(?:src|href)="([^"]*)"', html))


@pytest.mark.parametrize("role", ["viewer", None])
def test_files_the_page_references_are_served(client_for: ClientFor, role: str | None) -> None:
    client = client_for(role)
    assets = assets_of(client.get("/api/docs/").content.decode())
    for url in assets.scripts + assets.stylesheets:
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(body_of(response)) > 100, url
        kind = response["Content-Type"]
        if url.endswith(".css"):
            assert kind.startswith("text/css"), (url, kind)
        elif url.endswith(".svg"):  # the console's icon (base.html)
            assert kind.startswith("image/svg+xml"), (url, kind)
        else:
            assert kind.startswith(("application/javascript", "text/javascript")), (url, kind)
    bundle = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert b"SwaggerUIBundle" in body_of(bundle)
    script = client.get("/api/docs/?script=").content.decode()
    assert 'url: "/api/schema/"' in script
    assert '"deepLinking": false' in script  # SPECTACULAR_SETTINGS["SWAGGER_UI_SETTINGS"]


def test_a_write_tried_from_the_page_passes_the_csrf_check(role_users: dict[str, User]) -> None:
    """Swagger UI sends the session cookie with its calls (same origin) and the starting script
    adds the CSRF token in Django's header to every write: DRF's SessionAuthentication checks
    it, as the browser would see it (a client that enforces CSRF like a browser's request)."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(role_users["viewer"])
    script = browser.get("/api/docs/?script=").content.decode()
    found = re.search(r'request\.headers\["([^"]+)"\] = "([^"]+)";', script)
    assert found, "no CSRF header in the starting script"
    header, token = found.groups()
    assert header == "X-CSRFTOKEN"

    refused = browser.post("/api/v1/tokens/", {"name": "no-csrf"}, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    created = browser.post(
        "/api/v1/tokens/",
        {"name": "from-the-docs"},
        content_type="application/json",
        headers={header: token},
    )
    assert created.status_code == 201, created.content
    assert ApiToken.objects.filter(user=role_users["viewer"], name="from-the-docs").exists()


def test_reference_groups_operations_by_resource(client_for: ClientFor) -> None:
    """The schema tags each operation with its resource (issuance/api/schema.py), so the
    reference lists "certificates", "issuers", ... rather than everything under "v1"; the
    operation ids, which generated clients name their methods by, keep their `v1_`."""
    schema = client_for(None).get("/api/schema/?format=json").json()
    tags = {
        path: {tag for op in item.values() for tag in op["tags"]}
        for path, item in schema["paths"].items()
    }
    assert tags["/api/v1/certificates/"] == {"certificates"}
    assert tags["/api/v1/issuers/{name}/test-dns/"] == {"issuers"}
    assert tags["/api/v1/token/"] == {"token"}
    assert not any("v1" in found for found in tags.values())
    assert schema["paths"]["/api/v1/certificates/"]["get"]["operationId"] == "v1_certificates_list"
