"""Plain HTTP under ASGI (console.asgi_http): the API, pages and static files through it.

The whole Django request runs on one of a few long-lived threads; the answers must be the
ones Django's own ASGIHandler gives. Through a real uvicorn on PostgreSQL (the server is
another process, so it needs committed rows), and in-process for what needs no database.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from pytest_django import Settings

from console.asgi_http import ThreadedASGIHandler
from issuance.access.apitokens import create_token
from issuance.models import Certificate
from tests.factories import make_selfsigned_issuer
from tests.webserver import uvicorn_on_test_database

REPO = Path(__file__).resolve().parents[2]
CSS = REPO / "console" / "static" / "css" / "console.css"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[int]:
    with uvicorn_on_test_database(tmp_path, WEB_THREADS="3") as port:
        yield port


def call(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, http.client.HTTPMessage]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Host": "127.0.0.1", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.headers
    finally:
        conn.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_api_through_real_uvicorn(web: int) -> None:
    make_selfsigned_issuer("ss")
    user = User.objects.create_superuser("api", "api@example.test", "x")
    auth = {"Authorization": f"Token {create_token(user, 'asgi', actor='test')[1]}"}
    json_auth = {**auth, "Content-Type": "application/json"}
    cert = {
        "name": "shop",
        "spec": {"dnsNames": ["shop.example.test"], "issuerRef": {"name": "ss"}},
    }

    status, raw, _ = call(
        web, "POST", "/api/v1/certificates/", json.dumps(cert).encode(), json_auth
    )
    assert status == 201, raw
    assert json.loads(raw)["spec"]["secretName"] == "shop"
    assert Certificate.objects.get(name="shop").wake_seq == 1
    status, raw, _ = call(
        web, "POST", "/api/v1/certificates/", json.dumps(cert).encode(), json_auth
    )
    assert (status, json.loads(raw)) == (
        409,
        {"detail": "Certificate 'shop' already exists; use PUT or PATCH to change it."},
    )
    bad = {"name": "bad", "spec": {"dnsNames": ["a_b.test"], "issuerRef": {"name": "ss"}}}
    status, raw, _ = call(web, "POST", "/api/v1/certificates/", json.dumps(bad).encode(), json_auth)
    assert status == 400 and "spec.dnsNames[0]" in json.loads(raw)
    huge = json.dumps({**cert, "pad": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)})
    status, raw, _ = call(web, "POST", "/api/v1/certificates/", huge.encode(), json_auth)
    assert status == 413 and b"MAX_BODY_BYTES" in raw
    assert call(web, "GET", "/api/v1/certificates/shop/")[0] == 401  # no token
    status, raw, _ = call(web, "GET", "/api/v1/certificates/?state=Pending&limit=1", None, auth)
    assert status == 200 and json.loads(raw)["count"] == 1

    # More requests at once than the pool has threads: they queue, none is lost.
    with ThreadPoolExecutor(24) as pool:
        results = list(
            pool.map(
                lambda _: call(web, "GET", "/api/v1/certificates/shop/", None, auth), range(48)
            )
        )
    assert {status for status, _, _ in results} == {200}
    assert {json.loads(raw)["name"] for _, raw, _ in results} == {"shop"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_pages_static_files_and_cookies_through_real_uvicorn(web: int) -> None:
    status, raw, headers = call(web, "GET", "/login/")
    assert status == 200 and b"<form" in raw
    assert any(c.startswith("csrftoken=") for c in headers.get_all("Set-Cookie") or [])
    status, raw, headers = call(web, "GET", "/static/css/console.css")
    assert (status, raw) == (200, CSS.read_bytes())
    assert headers["Content-Type"].startswith("text/css")
    status, raw, _ = call(web, "HEAD", "/static/css/console.css")
    assert (status, raw) == (200, b"")
    assert call(web, "GET", "/login/", headers={"Host": "evil.example"})[0] == 400
    assert call(web, "GET", "/no/such/page/")[0] in (302, 404)


# -- in-process (no database needed) ---------------------------------------------------------


def _request(app: Any, path: str, method: str = "GET") -> tuple[dict[str, Any], bytes]:
    async def run() -> tuple[dict[str, Any], bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1")],
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 80),
        }
        comm = ApplicationCommunicator(app, scope)
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(10)
        body = b""
        while True:
            message = await comm.receive_output(10)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await comm.wait(10)
        return start, body

    return asyncio.run(run())


def test_streamed_file_is_sent_whole_in_chunks(settings: Settings) -> None:
    app = ThreadedASGIHandler(2)
    app.chunk_size = 1024  # the stylesheet spans several messages
    start, body = _request(app, "/static/css/console.css")
    assert start["status"] == 200
    assert body == CSS.read_bytes() and len(body) > 1024
    headers = {name.lower(): value for name, value in start["headers"]}
    assert int(headers[b"content-length"]) == len(body)


def test_only_http_scopes() -> None:
    async def run() -> None:
        await ThreadedASGIHandler(1)({"type": "websocket"}, None, None)

    with pytest.raises(ValueError, match="websocket"):
        asyncio.run(run())
