"""A database that cannot be reached, for in-process tests of the 503 and HTTP-01 paths.

The errors are real: psycopg's own error from connecting to a port where nothing listens,
wrapped by Django as it wraps every driver error. `unreachable()` makes this thread's
statements fail with it (as when the server went away under a live connection);
`held_down()` also keeps the process's availability probe from succeeding, so requests
are answered without the database until the block ends (the real probe, against a real
stopped server, is exercised by tests/e2e/test_pg_outage_web.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import psycopg
from django.db import OperationalError, connection

from issuance.availability import Availability, availability
from tests.e2e.servers import free_port


def connection_error() -> OperationalError:
    """Django's OperationalError raised from psycopg's (connection refused: no SQLSTATE)."""
    try:
        psycopg.connect(f"host=127.0.0.1 port={free_port()} connect_timeout=2")
    except psycopg.OperationalError as exc:
        try:
            raise OperationalError(str(exc)) from exc
        except OperationalError as wrapped:
            return wrapped
    raise AssertionError("something listens on a free port")


@contextmanager
def unreachable(when: Callable[[str], bool] = lambda sql: True) -> Iterator[None]:
    """This thread's statements (those `when` selects) fail as with no database."""
    error = connection_error()

    def fail(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if when(sql):
            raise error
        return execute(sql, *args)

    with connection.execute_wrapper(fail):
        yield


@contextmanager
def probe_fails() -> Iterator[None]:
    """The availability probe finds the database down until the block ends (it runs in
    another thread, which `unreachable()` does not reach: without this it may mark the
    database up again before the test looks)."""
    with patch.object(Availability, "probe", lambda self: False):
        yield


@contextmanager
def held_down() -> Iterator[None]:
    """The process knows the database is down until the block ends; then it is up again."""
    try:
        with probe_fails():
            availability.failed(connection_error())
            yield
    finally:
        assert availability.wait_until_up(10), "the availability probe did not recover"


@contextmanager
def recovers() -> Iterator[None]:
    """For a test that makes the process mark the database down: wait until it is up."""
    try:
        yield
    finally:
        assert availability.wait_until_up(10), "the availability probe did not recover"
