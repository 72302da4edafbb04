"""HTTP-01 answers at the ASGI layer (console.asgi), through a real uvicorn, any Host."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from issuance.models import Challenge, Order
from tests.factories import make_acme_issuer, make_challenge, make_order
from tests.webserver import uvicorn_on_test_database

# The uvicorn process reads the test database, so rows must be committed.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def order() -> Order:
    return make_order(make_acme_issuer())


@pytest.fixture
def web(tmp_path: Path) -> Iterator[int]:
    with uvicorn_on_test_database(tmp_path) as port:
        yield port


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


def _lookups_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            " AND query LIKE %s",
            [f"%{Challenge._meta.db_table}%token%"],
        )
        return int(cursor.fetchone()[0])


def test_a_burst_of_fetches_is_answered_by_one_query(order: Order, web: int) -> None:
    """Pebble's perspectives fetch a token at once: one lookup serves them all."""
    chal = make_challenge(order, "www.example.test", token="tok-burst", presented=True)
    path = "/.well-known/acme-challenge/tok-burst"
    db = settings.DATABASES["default"]
    # A table lock held by another session keeps the lookup in flight while the burst lands.
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"]
    ) as locker:
        locker.execute(f'LOCK TABLE "{Challenge._meta.db_table}" IN ACCESS EXCLUSIVE MODE')
        with ThreadPoolExecutor(3) as pool:
            fetches = [pool.submit(fetch, web, "GET", path) for _ in range(3)]
            deadline = time.monotonic() + 15
            while _lookups_waiting_on_a_lock() == 0:
                assert time.monotonic() < deadline, "no lookup reached the database"
                time.sleep(0.05)
            time.sleep(0.5)  # the other two fetches have long arrived
            assert _lookups_waiting_on_a_lock() == 1
            assert not any(f.done() for f in fetches)
            locker.rollback()
            results = [f.result() for f in fetches]
    assert [(status, body.decode()) for status, body, _ in results] == [(200, chal.spec["key"])] * 3


def test_a_cleaned_up_token_is_not_answered_any_more(order: Order, web: int) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-gone", presented=True)
    path = "/.well-known/acme-challenge/tok-gone"
    assert fetch(web, "GET", path)[:2] == (200, chal.spec["key"].encode())
    type(chal).objects.filter(pk=chal.pk).update(presented=False)
    assert fetch(web, "GET", path)[0] == 404
