"""PostgreSQL LISTEN for worker wake-ups, on its own psycopg connection (autocommit)."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import psycopg
from django.db import connection

from issuance.worker.wakeup import NOTIFY_CHANNEL, STEPS_PAYLOAD

log = logging.getLogger("issuance.worker")


def _conninfo() -> dict[str, Any]:
    s = connection.settings_dict
    # A server that does not answer must not hold the worker's loop: give up after 5 s.
    info: dict[str, Any] = {"dbname": s["NAME"], "autocommit": True, "connect_timeout": 5}
    for key, arg in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if s.get(key):
            info[arg] = s[key]
    if s.get("PORT"):
        info["port"] = int(s["PORT"])
    return info


class Listener:
    """Waits for NOTIFY on the wake-up channel; reconnects lazily after errors."""

    def __init__(self) -> None:
        self._conn: psycopg.Connection[Any] | None = None
        # Logged once per failure streak (the worker logs the outage itself).
        self._failing = False
        # A notification asked for the steps (wakeup.request_steps); the loop clears it.
        self.steps_requested = False
        # LISTEN before the worker's first look for work, or a NOTIFY sent in between is lost.
        self._connect()

    def _connect(self) -> psycopg.Connection[Any] | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            conn = psycopg.connect(**_conninfo())
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error as exc:
            # Once per failure streak; debug only: a lost database is logged by the worker.
            if not self._failing:
                log.debug("cannot LISTEN for wake-ups (%s); polling instead", exc)
            self._failing = True
            return None
        if self._failing:
            log.debug("listening for wake-ups again")
        self._failing = False
        self._conn = conn
        return conn

    def wait(self, timeout: float) -> bool:
        """True when a notification arrived within `timeout` seconds, or when listening
        resumed after a failure (NOTIFYs sent meanwhile were lost: look for work)."""
        was_failing = self._failing
        conn = self._connect()
        if conn is None:
            time.sleep(timeout)
            return False
        if was_failing:
            return True
        try:
            got = False
            for note in conn.notifies(timeout=timeout, stop_after=1):
                got = True
                self.steps_requested |= note.payload == STEPS_PAYLOAD
            if got:  # several wake-ups in a burst make one pass, not many
                for note in conn.notifies(timeout=0.0):
                    self.steps_requested |= note.payload == STEPS_PAYLOAD
            return got
        except psycopg.Error as exc:
            if not self._failing:
                log.debug("wake-up listener failed (%s); reconnecting", exc)
            self._failing = True
            self.close()
            return False

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


class SqliteWatcher:
    """Sees commits by other processes on SQLite, which has no NOTIFY.

    `PRAGMA data_version` changes when another connection committed since the last call
    on this connection; checking it costs microseconds, so an idle worker can look twice a
    second instead of re-running its queries.
    """

    def __init__(self) -> None:
        self._seen: int | None = None

    def _version(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            row = cursor.fetchone()
        return int(row[0]) if row else 0

    def mark(self) -> None:
        """Remember the current version (call before looking for work)."""
        self._seen = self._version()

    def changed(self) -> bool:
        return self._seen is None or self._version() != self._seen
