"""HTTP-01 lookups: one precompiled statement, and one query per burst of identical lookups.

Real databases and real threads. A burst is made to overlap by slowing the leader's query
down (an execute wrapper that sleeps before running the real statement), so the others
arrive while it is in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from issuance.acme.solvers.http01 import solver
from issuance.acme.solvers.http01.solver import key_authorization_for
from issuance.models import Challenge, Order
from tests.factories import make_acme_issuer, make_challenge, make_order


@pytest.fixture
def order(db: None) -> Order:
    return make_order(make_acme_issuer())


def test_lookup_is_one_statement_with_the_orm_semantics(order: Order) -> None:
    chal = make_challenge(order, "a.example.test", token="tok-one", presented=True)
    make_challenge(order, "a.example.test", "dns-01", token="tok-dns", presented=True)
    make_challenge(order, "a.example.test", token="tok-done", presented=True, finished=True)
    make_challenge(order, "a.example.test", token="tok-quiet")
    key_authorization_for("tok-one")  # compiled on first use
    with CaptureQueriesContext(connection) as ctx:
        assert key_authorization_for("tok-one") == chal.key_authorization
    assert len(ctx.captured_queries) == 1
    for token in ("tok-dns", "tok-done", "tok-quiet", "nope"):
        assert key_authorization_for(token) is None
    with CaptureQueriesContext(connection) as ctx:
        assert key_authorization_for("bad.token!") is None
        assert key_authorization_for("x" * 257) is None
    assert ctx.captured_queries == []  # never reaches the database


def test_oldest_presented_challenge_wins(order: Order) -> None:
    """As .first() did: Challenge's ordering (created_at, id) picks among equal tokens."""
    old = make_challenge(order, "a.example.test", token="tok-twice", presented=True, key="old")
    make_challenge(order, "b.example.test", token="tok-twice", presented=True, key="new")
    assert key_authorization_for("tok-twice") == old.key_authorization == "old"
    Challenge.objects.filter(pk=old.pk).update(presented=False)
    assert key_authorization_for("tok-twice") == "new"


def test_a_cleaned_up_token_stops_answering_at_once(order: Order) -> None:
    chal = make_challenge(order, "a.example.test", token="tok-clean", presented=True)
    assert key_authorization_for("tok-clean") == chal.key_authorization
    Challenge.objects.filter(pk=chal.pk).update(presented=False)
    assert key_authorization_for("tok-clean") is None
    Challenge.objects.filter(pk=chal.pk).update(presented=True)
    assert key_authorization_for("tok-clean") == chal.key_authorization
    Challenge.objects.filter(pk=chal.pk).update(finished=True)
    assert key_authorization_for("tok-clean") is None


# -- bursts, on threads with their own connections ------------------------------------


class Statements:
    """Counts the lookup statements run on any thread; the first one is held back."""

    def __init__(self, hold: float, fail_first: bool = False) -> None:
        self.hold = hold
        self.fail_first = fail_first
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        with self.lock:
            self.count += 1
            first = self.count == 1
        if first:
            time.sleep(self.hold)  # the others arrive while this one is in flight
            if self.fail_first:
                raise DatabaseError("connection lost (injected)")
        return execute(sql, *args)


@contextmanager
def burst_runner(statements: Statements) -> Iterator[Callable[[str, int], list[Any]]]:
    def lookup(token: str) -> Any:
        try:
            with connection.execute_wrapper(statements):
                return key_authorization_for(token)
        except DatabaseError as exc:
            return exc
        finally:
            connection.close()

    def run(token: str, n: int) -> list[Any]:
        with ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(lookup, token)]
            time.sleep(statements.hold / 4)  # the leader is in its query by now
            futures += [pool.submit(lookup, token) for _ in range(n - 1)]
            return [f.result() for f in futures]

    yield run


@pytest.mark.django_db(transaction=True)
def test_concurrent_lookups_of_one_token_share_one_query() -> None:
    order = make_order(make_acme_issuer())
    chal = make_challenge(order, "a.example.test", token="tok-burst", presented=True)
    statements = Statements(hold=0.4)
    with burst_runner(statements) as run:
        assert run("tok-burst", 4) == [chal.key_authorization] * 4
        assert statements.count == 1
        # Nothing is kept once the query has returned: the next lookup asks again, and a
        # token cleaned up in between is not answered.
        Challenge.objects.filter(pk=chal.pk).update(presented=False)
        assert run("tok-burst", 1) == [None]
        assert statements.count == 2
    assert solver._flights == {}


@pytest.mark.django_db(transaction=True)
def test_different_tokens_do_not_wait_for_each_other() -> None:
    order = make_order(make_acme_issuer())
    a = make_challenge(order, "a.example.test", token="tok-a", presented=True)
    b = make_challenge(order, "b.example.test", token="tok-b", presented=True)
    statements = Statements(hold=0.3)

    def lookup(token: str) -> str | None:
        try:
            with connection.execute_wrapper(statements):
                return key_authorization_for(token)
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(lookup, "tok-a")
        time.sleep(0.05)
        started = time.monotonic()
        second = pool.submit(lookup, "tok-b")
        assert second.result() == b.key_authorization
        assert time.monotonic() - started < 0.25  # did not wait for tok-a's held query
        assert first.result() == a.key_authorization
    assert statements.count == 2


@pytest.mark.django_db(transaction=True)
def test_a_failed_leader_does_not_fail_the_others() -> None:
    """The leader's caller gets its error; those waiting on it ask the database themselves."""
    order = make_order(make_acme_issuer())
    chal = make_challenge(order, "a.example.test", token="tok-fail", presented=True)
    statements = Statements(hold=0.3, fail_first=True)
    with burst_runner(statements) as run:
        results = run("tok-fail", 3)
    assert isinstance(results[0], DatabaseError)
    assert results[1:] == [chal.key_authorization] * 2
    assert solver._flights == {}
