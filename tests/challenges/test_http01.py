"""HTTP-01 answers: the web app's middleware/view, the standalone http01_solver, self-checks.

Real HTTP: a solver server on a free port (in a thread, and as `manage.py http01_solver`
in a subprocess), and the self-check's own GET against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from pytest_django import Settings

from issuance.acme.solvers.selfcheck import check_http01
from issuance.controllers import challenges as controller
from issuance.management.commands.http01_solver import make_server
from issuance.models import Event, Order
from tests.e2e.servers import free_port, wait_for_tcp
from tests.factories import make_acme_issuer, make_challenge, make_order

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def order(db: None) -> Order:
    return make_order(make_acme_issuer())


def get(url: str) -> tuple[int, str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - local test URL
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


# -- the web app -----------------------------------------------------------------------


def test_web_app_answers_presented_token_for_any_host(order: Order) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-web_1", presented=True)
    client = Client(HTTP_HOST="www.example.test")  # not in ALLOWED_HOSTS: must still answer
    response = client.get("/.well-known/acme-challenge/tok-web_1")
    assert response.status_code == 200
    assert response.content.decode() == chal.key_authorization
    assert response["Content-Type"].startswith("text/plain")
    assert "no-store" in response["Cache-Control"]
    assert client.head("/.well-known/acme-challenge/tok-web_1").status_code == 200
    assert client.post("/.well-known/acme-challenge/tok-web_1").status_code == 405


@pytest.mark.parametrize(
    ("fields", "type_"),
    [
        ({"presented": False}, "http-01"),  # not presented yet
        ({"presented": True, "finished": True, "state": "valid"}, "http-01"),  # done
        ({"presented": True}, "dns-01"),  # a DNS-01 token is never served over HTTP
    ],
)
def test_web_app_does_not_answer_other_tokens(
    order: Order, fields: dict[str, Any], type_: str
) -> None:
    make_challenge(order, "www.example.test", type_, token="tok-hidden", **fields)
    client = Client(HTTP_HOST="www.example.test")
    assert client.get("/.well-known/acme-challenge/tok-hidden").status_code == 404
    assert client.get("/.well-known/acme-challenge/unknown").status_code == 404
    assert client.get("/.well-known/acme-challenge/bad.token!").status_code == 404


def test_answer_stops_once_finished(order: Order) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-stop", presented=True)
    client = Client()
    assert client.get("/.well-known/acme-challenge/tok-stop").status_code == 200
    type(chal).objects.filter(pk=chal.pk).update(finished=True, state="valid")
    # Nothing cached: the next request sees the database.
    assert client.get("/.well-known/acme-challenge/tok-stop").status_code == 404


# -- the standalone solver (real sockets) ----------------------------------------------


@pytest.fixture
def solver_server(transactional_db: None) -> Iterator[int]:
    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_solver_server_answers_bursts(solver_server: int) -> None:
    order = make_order(make_acme_issuer(), with_certificate=False)
    chal = make_challenge(order, "burst.example.test", token="tok-burst", presented=True)
    base = f"http://127.0.0.1:{solver_server}"
    url = f"{base}/.well-known/acme-challenge/tok-burst"
    # Like a multi-perspective VA: many simultaneous fetches of one token.
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: get(url), range(64)))
    assert {status for status, _, _ in results} == {200}
    assert {body for _, body, _ in results} == {chal.key_authorization}
    assert get(f"{base}/.well-known/acme-challenge/nope")[0] == 404
    assert get(f"{base}/")[0] == 404
    assert get(f"{base}/admin/")[0] == 404


def test_http_self_check_passes_and_fails_visibly(solver_server: int, settings: Settings) -> None:
    settings.HTTP01_SELF_CHECK_PORT = solver_server
    settings.SELF_CHECK_NAMESERVERS = []
    order = make_order(make_acme_issuer(), with_certificate=False)
    chal = make_challenge(order, "localhost", token="tok-check", presented=True)
    assert check_http01("localhost", "tok-check", chal.key_authorization) is None
    wrong = check_http01("localhost", "tok-check", "something-else")
    assert wrong is not None and "did not get the expected response" in wrong
    missing = check_http01("localhost", "tok-missing", "x")
    assert missing is not None and "wrong status code '404'" in missing


def test_failed_self_check_is_visible_on_the_challenge(
    transactional_db: None, settings: Settings
) -> None:
    """A presented challenge whose token is not reachable: reason, attempts, next check."""
    port = free_port()  # nothing listens here
    settings.HTTP01_SELF_CHECK_PORT = port
    settings.SELF_CHECK_NAMESERVERS = []
    settings.SELF_CHECK_INTERVAL = timedelta(seconds=10)
    order = make_order(make_acme_issuer())
    chal = make_challenge(
        order, "localhost", processing=True, presented=True, state="pending", token="tok-x"
    )
    result = controller.reconcile(chal)
    assert result.requeue_after == timedelta(seconds=10)
    chal.refresh_from_db()
    assert chal.attempts == 1
    assert chal.reason.startswith("self check failed: GET http://localhost:")
    assert "Connection refused" in chal.reason or "ConnectionRefused" in chal.reason
    assert chal.next_check_at is not None
    assert chal.processing and not chal.finished and chal.state == "pending"
    event = Event.objects.get(kind="Challenge", name=chal.name, reason="SelfCheckFailed")
    certificate = order.request.certificate
    assert certificate is not None
    assert event.certificate_name == certificate.name
    # Retried: attempts count up, one event per failure streak (no spam every 10 s).
    controller.reconcile(chal)
    chal.refresh_from_db()
    assert chal.attempts == 2
    assert Event.objects.filter(name=chal.name, reason="SelfCheckFailed").count() == 1


# -- `manage.py http01_solver` as its own process ----------------------------------------


@pytest.mark.postgres
def test_http01_solver_command_serves_and_stops_on_sigterm(transactional_db: None) -> None:
    order = make_order(make_acme_issuer(), with_certificate=False)
    chal = make_challenge(order, "cmd.example.test", token="tok-cmd", presented=True)
    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "1", "KEY_ENCRYPTION_KEY": "x"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "http01_solver", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_tcp("127.0.0.1", port, timeout=30)
        base = f"http://127.0.0.1:{port}"
        status, body, headers = get(f"{base}/.well-known/acme-challenge/tok-cmd")
        assert (status, body) == (200, chal.key_authorization)
        assert headers["Content-Type"] == "text/plain"
        assert get(f"{base}/.well-known/acme-challenge/other")[0] == 404
        assert get(f"{base}/api/v1/")[0] == 404  # nothing but tokens
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(15) == 0
        assert time.monotonic() - started < 10
        assert b"stopped" in (proc.stdout.read() if proc.stdout else b"")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
