"""HTTP-01 answers at the ASGI layer (console.asgi), through a real uvicorn, any Host."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from issuance.models import Order
from tests.challenges.builders import make_acme_issuer, make_challenge, make_order
from tests.e2e.servers import Process, free_port, start_uvicorn

# The uvicorn process reads the test database, so rows must be committed.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def order() -> Order:
    return make_order(make_acme_issuer())


@pytest.fixture
def web(tmp_path: Path) -> Iterator[int]:
    db = settings.DATABASES["default"]
    port = free_port()
    env = {
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": "asgi-test",
        "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "LOG_LEVEL": "WARNING",
    }
    proc: Process = start_uvicorn(tmp_path, port, env)
    try:
        yield port
    finally:
        proc.stop()


def fetch(
    port: int, method: str, path: str, host: str = "www.example.test"
) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def test_answers_like_the_middleware(order: Order, web: int) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-asgi_1", presented=True)
    make_challenge(order, "www.example.test", token="tok-quiet", presented=False)
    path = "/.well-known/acme-challenge/"
    status, body, headers = fetch(web, "GET", path + "tok-asgi_1")
    assert (status, body.decode()) == (200, chal.spec["key"])
    assert headers["content-type"].startswith("text/plain")
    assert "no-store" in headers["cache-control"]
    status, body, _ = fetch(web, "HEAD", path + "tok-asgi_1")
    assert (status, body) == (200, b"")
    status, _, headers = fetch(web, "POST", path + "tok-asgi_1")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    for token in ("tok-quiet", "unknown", "bad.token!"):
        assert fetch(web, "GET", path + token)[0] == 404
    # Everything else still goes to Django (which checks ALLOWED_HOSTS again).
    assert fetch(web, "GET", "/login/", host="127.0.0.1")[0] == 200
    assert fetch(web, "GET", "/login/", host="www.example.test")[0] == 400
