"""Is the database answering? One view per process, for web requests and HTTP-01 answers.

When PostgreSQL is stopped, restarting or unreachable, everything that touches it fails,
each after waiting up to the pool's timeout for a connection. So that requests answer at
once instead (a 503, or an HTTP-01 answer from memory), the process keeps a small state:

- up: requests use the database as usual (the check is one unlocked attribute read);
- down, from the first request that failed because the database could not be reached:
  requests answer at once without it, and a background thread probes it (one statement
  on a connection of its own, opened with the pool's parameters) until it answers, then
  marks it up.
  So recovery needs no restart, and no request ever waits for a probe.

Each change is logged once (down with the reason; up with the outage's length and how
many requests were answered without the database). On each change the connection pool is
seen to: when it goes down its idle connections are checked in the background; when it is
back the prober drops every connection opened before (in use ones when they come back) and
reopens as many as the process used before, before requests use it again.

Only errors that mean "no database" count (no connection, connection lost, the server
shutting down or starting up, too many clients); a lock timeout or a cancelled statement
is an ordinary error of that request.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections

log = logging.getLogger("issuance.availability")

# SQLSTATEs of a server that is going away or not there yet (all of class 08 counts too):
# admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections.
_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})


class DatabaseUnavailable(Exception):
    """The database cannot be reached now (raised where no answer can be given without it)."""


def is_unavailable_error(exc: BaseException) -> bool:
    """Does `exc` (or what it was raised from) mean the database cannot be reached?

    Django wraps the driver's error (its __cause__): psycopg's OperationalError without a
    SQLSTATE is a connection that failed or broke (refused, closed, the pool's timeout);
    Django's InterfaceError is a connection already closed.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DatabaseUnavailable | InterfaceError):
            return True
        if isinstance(current, psycopg.InterfaceError):
            return True
        if isinstance(current, psycopg.OperationalError):
            sqlstate = current.sqlstate
            return (
                sqlstate is None or sqlstate.startswith("08") or sqlstate in _UNAVAILABLE_SQLSTATES
            )
        current = current.__cause__ or current.__context__
    return False


class Availability:
    """The process's view of the database (see the module's docstring)."""

    # Between two probes that failed at once (a refused connection fails in microseconds).
    PROBE_INTERVAL = 0.2
    # Longest the prober waits for the pool to reopen its connections before letting
    # requests in again (opening one takes milliseconds).
    REFILL_TIMEOUT = 1.0

    def __init__(self, alias: str = DEFAULT_DB_ALIAS) -> None:
        self.alias = alias
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._prober: threading.Thread | None = None
        self._refused = 0
        self._pool_size_before = 1

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def usable(self) -> bool:
        """May a request use the database now? False: answer without it, at once."""
        if self._down_since is None:  # the common case, without the lock
            return True
        with self._lock:
            self._refused += 1
        return False

    def failed(self, exc: BaseException) -> None:
        """A caller could not reach the database: mark it down and start probing (both
        once per outage, however many callers fail)."""
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = time.monotonic()
            self._refused = 0
            self._pool_size_before = _pool_size(self._pool())
            self._prober = threading.Thread(target=self._probe_until_up, name="db-probe")
            self._prober.daemon = True
        log.warning(
            "database unavailable (%s): answering 503 (HTTP-01 from memory) until it is back",
            one_line(exc),
        )
        self._check_pool()
        self._prober.start()

    def _probe_until_up(self) -> None:
        while self._down_since is not None:
            if self.probe():
                self._refill_pool()
                self._up()
                return
            time.sleep(self.PROBE_INTERVAL)

    def probe(self) -> bool:
        """One statement on a connection of its own. With a pool, opened beside it with the
        pool's own parameters: through the pool, a probe waited for its reconnection
        attempts, which back off 1 s after a refused one, and so saw a returned server up
        to a second late. Without a pool, as a request would run it."""
        pool = self._pool()
        if pool is not None:
            return reachable_beside(pool)
        connection = connections[self.alias]
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except DatabaseError as exc:
            if not is_unavailable_error(exc):
                log.warning("database probe failed: %s", one_line(exc))
            return False
        finally:
            try:
                connection.close()
            except DatabaseError:
                log.debug("closing the probe's broken connection failed", exc_info=True)

    def _up(self) -> None:
        with self._lock:
            since, self._down_since = self._down_since, None
            refused = self._refused
        if since is None:
            return
        log.warning(
            "database available again after %.1f s (%d requests answered without it)",
            time.monotonic() - since,
            refused,
        )

    def _pool(self) -> Any:
        """The process's psycopg pool, or None (SQLite, or the pool turned off)."""
        pool: Any = getattr(connections[self.alias], "pool", None)
        return pool if pool is not None and hasattr(pool, "check") else None

    def _clean_pool(self) -> None:
        """Throw away the pool's dead connections (psycopg_pool's check)."""
        pool = self._pool()
        if pool is None:
            return
        try:
            pool.check()
        except Exception as exc:  # a closed pool (shutdown, tests): nothing to clean
            log.debug("pool check failed: %s", exc)

    def _check_pool(self) -> None:
        """_clean_pool on a thread of its own: a check of a connection to an unreachable host
        may take long, and no request should wait for it."""
        threading.Thread(target=self._clean_pool, name="db-pool-check", daemon=True).start()

    def _refill_pool(self) -> None:
        """Before requests use the pool again (on the prober's thread): drop the connections
        the outage left dead and open as many as the process used before it, in parallel.
        The pool alone grows one connection at a time, so the first burst of requests and
        worker threads after the return queued behind it, waited out the pool's timeout and
        marked the database down a second time.

        Every connection opened before the return is dropped (psycopg_pool's drain), the
        ones in use too, when they come back: a thread idle through the outage (a worker's)
        hands back a dead connection it never used since, which looks healthy to the pool.
        Handed out again, it fails the pool's check and the pool makes that request sleep
        its first reconnection backoff (1 s), its whole timeout: a 503 and a second outage
        logged while the database was up (tests/e2e/test_pg_outage_pool.py)."""
        pool = self._pool()
        if pool is None:
            return
        try:
            idle = _stat(pool, "pool_available")
            opened_before = _stat(pool, "connections_num")
            pool.drain()
        except Exception as exc:  # a closed pool (shutdown, tests): nothing to refill
            log.debug("pool drain failed: %s", exc)
            return
        try:
            minimum, maximum = pool.min_size, pool.max_size
            target = min(max(self._pool_size_before, minimum), maximum)
            # The drain replaces the idle connections; those the outage already dropped
            # are opened here. resize() opens (new minimum - old minimum) connections,
            # whatever the pool holds.
            missing = target - _pool_size(pool)
            if missing > 0:
                pool.resize(min(minimum + missing, maximum), maximum)
            # Wait until the pool has opened, or is opening, every connection asked for
            # (connections_num counts attempts; its three opener threads work in parallel,
            # so the last few may still be connecting). Not counted as idle connections:
            # the worker's threads, back at the same moment, take them as they come, and
            # waiting for those let requests in only after the whole REFILL_TIMEOUT.
            opening = min(idle + max(missing, 0), target)
            deadline = time.monotonic() + self.REFILL_TIMEOUT
            while _stat(pool, "connections_num") - opened_before < opening:
                if time.monotonic() > deadline:  # a slow server: go on all the same
                    break
                time.sleep(0.01)
            if missing > 0:
                # Back to the configured minimum: the extra connections close once idle.
                pool.resize(minimum, maximum)
        except Exception as exc:  # a closed pool (shutdown, tests): nothing to refill
            log.debug("pool refill failed: %s", exc)

    def wait_until_up(self, timeout: float) -> bool:
        """Block until the prober saw the database again (tests)."""
        prober = self._prober
        if prober is not None:
            prober.join(timeout)
        return self._down_since is None


def reachable_beside(pool: Any) -> bool:
    """Does the database answer a statement on a connection opened beside the pool, with
    the pool's parameters? (The prober's probe; also how issuance.pooled_postgresql tells
    a busy pool from an unreachable database.)"""
    try:
        with psycopg.connect(pool.conninfo, **pool.kwargs) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error as exc:
        if not is_unavailable_error(exc):
            log.warning("database probe failed: %s", one_line(exc))
        return False


def _pool_size(pool: Any) -> int:
    """Connections the pool holds, in use or idle (1 without a pool)."""
    if pool is None:
        return 1
    try:
        return int(pool.get_stats().get("pool_size", 1))
    except Exception:  # a closed pool
        return 1


def _stat(pool: Any, name: str) -> int:
    """One of the pool's measures (pool_available: idle connections) or counters
    (connections_num: connection attempts so far); psycopg_pool leaves out a zero counter."""
    return int(pool.get_stats().get(name, 0))


def one_line(exc: BaseException) -> str:
    """The error on one line, at most 300 characters (libpq's messages span several)."""
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


availability = Availability()
