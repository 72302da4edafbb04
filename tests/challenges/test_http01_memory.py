"""HTTP-01 answers while the database cannot be reached: from memory, else 503.

In-process, with real driver errors (tests/dbfaults.py). The same through `manage.py
serve` and a stopped PostgreSQL is tests/e2e/test_pg_outage_web.py.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings

from issuance.acme.solvers.http01.solver import Http01Solver, RecentAnswers, key_authorization_for
from issuance.acme.solvers.http01.solver import recent_answers as memory
from issuance.availability import DatabaseUnavailable
from issuance.management.commands.http01_solver import make_server
from issuance.models import Challenge, Order
from tests.dbfaults import held_down, recovers, unreachable
from tests.factories import make_acme_issuer, make_challenge, make_order

PATH = "/.well-known/acme-challenge/"


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    memory.clear()
    yield
    memory.clear()


@pytest.fixture
def order(db: None) -> Order:
    return make_order(make_acme_issuer())


def fetch(token: str) -> Any:
    return Client().get(PATH + token, HTTP_HOST="www.example.test")


def test_a_token_answered_before_is_answered_while_the_database_is_unreachable(
    order: Order,
) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-mem", presented=True)
    assert key_authorization_for("tok-mem") == chal.key_authorization
    with recovers(), unreachable():
        assert key_authorization_for("tok-mem") == chal.key_authorization
        response = fetch("tok-mem")
    assert (response.status_code, response.content.decode()) == (200, chal.key_authorization)


def test_a_token_never_looked_up_here_gets_503_not_404(order: Order) -> None:
    make_challenge(order, "www.example.test", token="tok-new", presented=True)
    with recovers(), unreachable():
        with pytest.raises(DatabaseUnavailable):
            key_authorization_for("tok-new")
        response = fetch("tok-new")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/plain")
    assert response["Retry-After"] == "5"
    assert "no-store" in response["Cache-Control"]


def test_a_cleaned_up_token_is_forgotten(order: Order) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-gone", presented=True)
    assert key_authorization_for("tok-gone") == chal.key_authorization
    Challenge.objects.filter(pk=chal.pk).update(presented=False)
    assert key_authorization_for("tok-gone") is None  # the database decides while it answers
    with recovers(), unreachable(), pytest.raises(DatabaseUnavailable):
        key_authorization_for("tok-gone")


def test_the_memory_is_only_a_fallback(order: Order) -> None:
    """While the database answers, it decides, even against what the memory holds."""
    chal = make_challenge(order, "www.example.test", token="tok-db", presented=True)
    memory.remember("tok-db", "stale")
    assert key_authorization_for("tok-db") == chal.key_authorization
    memory.remember("tok-unknown", "stale")
    assert key_authorization_for("tok-unknown") is None
    assert memory.recall("tok-unknown") is None


def test_while_down_the_memory_answers_without_a_query(order: Order) -> None:
    chal = make_challenge(order, "www.example.test", token="tok-fast", presented=True)
    assert key_authorization_for("tok-fast") == chal.key_authorization
    with held_down(), CaptureQueriesContext(connection) as queries:
        assert fetch("tok-fast").content.decode() == chal.key_authorization
        assert fetch("tok-other").status_code == 503
        assert fetch("bad.token!").status_code == 404  # never a token: no lookup at all
    assert queries.captured_queries == []


@pytest.mark.django_db(transaction=True)
def test_the_standalone_solver_answers_from_memory_too() -> None:
    """`manage.py http01_solver` (its server, on a real port, a thread per request)."""
    order = make_order(make_acme_issuer())
    chal = make_challenge(order, "www.example.test", token="tok-solo", presented=True)
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}{PATH}"
    try:
        assert get(base + "tok-solo") == (200, chal.key_authorization)
        with held_down():
            assert get(base + "tok-solo") == (200, chal.key_authorization)
            assert get(base + "tok-unknown") == (503, "database unavailable\n")
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - local test URL
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_present_remembers_and_cleanup_forgets(order: Order) -> None:
    """The worker's solver calls, which warm the memory when it runs in the web process."""
    chal = make_challenge(order, "www.example.test", token="tok-solver")
    solver = Http01Solver({})
    solver.present(chal)
    with recovers(), unreachable():
        assert key_authorization_for("tok-solver") == chal.key_authorization
    solver.cleanup(chal)
    assert memory.recall("tok-solver") is None


def test_entries_expire_after_the_challenge_timeout(settings: Settings) -> None:
    """Testing the expiry itself, so the timeout is short here."""
    settings.CHALLENGE_PROCESSING_TIMEOUT = timedelta(seconds=0.1)
    memory.remember("tok-old", "key")
    assert memory.recall("tok-old") == "key"
    time.sleep(0.15)
    assert memory.recall("tok-old") is None


def test_the_memory_is_bounded_oldest_first() -> None:
    answers = RecentAnswers(max_entries=3)
    for n in range(5):
        answers.remember(f"tok-{n}", f"key-{n}")
    answers.remember("tok-2", "key-2")  # used again: now the newest
    assert [answers.recall(f"tok-{n}") for n in range(5)] == [None, None, "key-2", "key-3", "key-4"]
    answers.remember("tok-5", "key-5")
    assert answers.recall("tok-3") is None and answers.recall("tok-2") == "key-2"
