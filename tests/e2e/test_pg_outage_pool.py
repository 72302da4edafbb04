"""The connection pool after PostgreSQL was killed and started again, in this process.

A connection taken from the pool before the kill and handed back only after the return
(a worker thread idle through the outage does that) looks healthy to the pool: nobody used
it since the server died. Handed out again, it fails the pool's check, and the pool makes
that request sleep its first reconnection backoff (1 s) before it tries another
connection: the request waits out the pool's timeout (1 s), answers 503, and the process
marks a database that is up as down a second time (a loaded CI run showed exactly that).

Real parts: a private PostgreSQL server (tests/e2e/pgserver.py), Django's own psycopg pool
with the project's settings for it, and the process's availability prober.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, connections

from issuance.availability import Availability, is_unavailable_error
from tests.e2e.pgserver import SERVICE_USER, PgServer, private_postgres

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ALIAS = "outage-pool"
FAST = 0.5  # seconds: a connection ready in the pool is handed out in milliseconds


@pytest.fixture
def pg(e2e_workdir: Path) -> Iterator[PgServer]:
    with private_postgres(e2e_workdir) as server:
        yield server


@pytest.fixture
def alias(pg: PgServer, django_db_blocker: Any) -> Iterator[str]:
    """A database alias on the private server, with the pool settings the console uses (no
    test database: the private server is this test's alone)."""
    default = connections.settings["default"]
    if "pool" not in default.get("OPTIONS", {}):
        pytest.skip("the connection pool is PostgreSQL's (DATABASE_POOL_MAX_SIZE > 0)")
    config = copy.deepcopy(default)
    config.update(NAME=pg.dbname, USER=SERVICE_USER, HOST="127.0.0.1", PORT=pg.port)
    config["TEST"] = {"NAME": pg.dbname}
    connections.settings[ALIAS] = config
    try:
        with django_db_blocker.unblock():
            yield ALIAS
    finally:
        wrapper: Any = connections[ALIAS]  # PostgreSQL's wrapper: it has the pool
        wrapper.close_pool()
        del connections[ALIAS]
        del connections.settings[ALIAS]


def select_one(alias: str) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT 1")


class HeldAcrossTheOutage:
    """A thread that takes a pooled connection, then does nothing until told to hand it
    back (Django's connections are per thread: this is how a worker thread holds one)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.taken = threading.Event()
        self.give_back = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.taken.wait(10)

    def _run(self) -> None:
        select_one(self.alias)
        self.taken.set()
        self.give_back.wait(60)
        connections[self.alias].close()  # back to the pool, unused since the kill
        self.done.set()

    def hand_back(self) -> None:
        self.give_back.set()
        assert self.done.wait(10)
        self.thread.join(10)


def taking_every_ready_connection(pool: Any) -> list[float]:
    """How long each getconn() took, taking as many as the pool had ready (then all back)."""
    ready = int(pool.get_stats().get("pool_available", 0))
    taken, waits = [], []
    try:
        for _ in range(max(ready, 1)):
            started = time.monotonic()
            taken.append(pool.getconn())
            waits.append(time.monotonic() - started)
    finally:
        for conn in taken:
            pool.putconn(conn)
    return waits


def test_a_connection_held_through_a_kill_is_never_handed_out_again(
    pg: PgServer, alias: str
) -> None:
    availability = Availability(alias)
    held = [HeldAcrossTheOutage(alias) for _ in range(3)]
    select_one(alias)  # one idle in the pool too
    connections[alias].close()

    pg.kill()
    with pytest.raises(DatabaseError) as failure:
        select_one(alias)
    assert is_unavailable_error(failure.value)
    availability.failed(failure.value)
    assert availability.down
    pg.start()
    assert availability.wait_until_up(30), "the prober saw the database again"

    for thread in held:
        thread.hand_back()
    wrapper: Any = connections[alias]
    pool = wrapper.pool
    waits = taking_every_ready_connection(pool)
    assert max(waits) < FAST, waits
    select_one(alias)
    assert not availability.down


def test_the_probe_connects_beside_the_pool(pg: PgServer, alias: str) -> None:
    """The prober's statement never waits for the pool: the pool retries a refused
    connection only after a 1 s backoff, so a probe through it saw a returned server up to
    a second late. Its own connection, with the pool's parameters, sees it at once."""
    availability = Availability(alias)
    select_one(alias)
    connections[alias].close()
    wrapper: Any = connections[alias]
    pool = wrapper.pool
    asked = pool.get_stats()["requests_num"]
    assert availability.probe()
    pg.kill()
    assert not availability.probe()
    pg.start()
    assert availability.probe()
    assert pool.get_stats()["requests_num"] == asked, "the probe took a pooled connection"


def _every_connection_held(alias: str) -> list[HeldAcrossTheOutage]:
    """Threads holding as many pooled connections as the pool may open."""
    wrapper: Any = connections[alias]
    return [HeldAcrossTheOutage(alias) for _ in range(wrapper.pool.max_size)]


def test_a_busy_pool_with_the_database_up_is_waited_for_not_an_outage(
    pg: PgServer, alias: str
) -> None:
    """Every connection in use, one handed back after more than the pool's timeout: the
    next caller waits and runs its statement (issuance.pooled_postgresql), where the pool
    alone raised its timeout, a 503 with the database up."""
    wrapper: Any = connections[alias]
    timeout = wrapper.pool.timeout
    held = _every_connection_held(alias)
    handed_back = threading.Timer(timeout * 2, held[0].hand_back)
    started = time.monotonic()
    handed_back.start()
    try:
        select_one(alias)
        waited = time.monotonic() - started
    finally:
        handed_back.join()
        for thread in held[1:]:
            thread.hand_back()
    assert waited >= timeout * 2, (waited, timeout)


def test_a_busy_pool_with_the_database_gone_is_an_outage_after_the_timeout(
    pg: PgServer, alias: str
) -> None:
    """The same busy pool while the server is stopped: the caller's own connection is
    refused, so the timeout stands (a 503 after it, not BUSY_LIMIT later)."""
    wrapper: Any = connections[alias]
    timeout = wrapper.pool.timeout
    held = _every_connection_held(alias)
    pg.stop()
    started = time.monotonic()
    try:
        with pytest.raises(DatabaseError) as failure:
            select_one(alias)
        waited = time.monotonic() - started
    finally:
        for thread in held:
            thread.hand_back()
    assert is_unavailable_error(failure.value)
    assert timeout <= waited < timeout + 2, (waited, timeout)
