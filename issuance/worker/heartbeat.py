"""Keeping the leases of the items in flight alive, and giving back what could not be released.

A claim leases a row for `WORKER_LEASE` (20 s by default). While its reconcile runs (an ACME
call may wait up to its client timeout), this worker's heartbeat thread pushes `lease_until`
forward every quarter of the lease, so no other worker takes the row over. When the worker
dies (SIGKILL, a lost host), the beats stop and its rows become claimable within one lease:
a restarted or second worker resumes them within `WORKER_LEASE`, not minutes later. See
docs/decisions/0002-leases-and-heartbeats.md.

A row whose release failed (the database went away while the item was in flight) is
"stranded": the heartbeat gives it back (unleased, due at once) as soon as the database
answers again, so the work resumes without waiting for the lease to run out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connection, connections
from django.db.models import Model
from django.utils import timezone

from issuance.models import Event
from issuance.observability import events
from issuance.worker.outage import DatabaseOutage

log = logging.getLogger("issuance.worker")

# While the database is failing, look again this often: stranded rows go back within about a
# second of it answering.
RETRY_INTERVAL = 1.0
MAX_KEPT_ENTRIES = 10_000

Key = tuple[type[Model], Any]


class Heartbeat:
    """Renews `owner`'s leases on the rows it holds; one thread per worker."""

    def __init__(self, owner: str, lease: timedelta, outage: DatabaseOutage) -> None:
        self.owner = owner
        self.lease = lease
        self.interval = lease.total_seconds() / 4
        self.outage = outage
        self._lock = threading.Lock()
        self._held: dict[Key, int] = {}
        self._stranded: set[Key] = set()
        self._entries: list[Event] = []  # timeline entries the database refused
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the worker tells it ----------------------------------------------------------

    def hold(self, model: type[Model], pk: Any) -> None:
        """`pk` was claimed and its reconcile is about to start."""
        with self._lock:
            self._held[(model, pk)] = self._held.get((model, pk), 0) + 1

    def drop(self, model: type[Model], pk: Any) -> None:
        """`pk` was released (or its lease is no longer ours)."""
        with self._lock:
            count = self._held.pop((model, pk), 0) - 1
            if count > 0:
                self._held[(model, pk)] = count

    def strand(self, model: type[Model], pk: Any) -> None:
        """The release of `pk` failed: give it back when the database answers again."""
        with self._lock:
            self._stranded.add((model, pk))
        self._poke.set()

    def keep_entries(self, batch: list[Event], exc: DatabaseError) -> None:
        """Timeline entries that could not be stored: written when the database answers
        again (at most MAX_KEPT_ENTRIES are kept; an outage must not eat the memory)."""
        if not self.outage.noted(exc):
            log.exception("could not record %d timeline entries", len(batch))
            return
        with self._lock:
            room = max(0, MAX_KEPT_ENTRIES - len(self._entries))
            self._entries += batch[:room]
        if len(batch) > room:
            log.warning("dropped %d timeline entries (too many kept)", len(batch) - room)
        self._poke.set()

    def held(self) -> list[Key]:
        with self._lock:
            return list(self._held)

    def stranded(self) -> list[Key]:
        with self._lock:
            return list(self._stranded)

    # -- one beat (called by the thread; tests call it directly) ---------------------------

    def beat(self) -> bool:
        """Renew the held leases, then give back stranded rows. False if the database
        failed (the next beat comes after RETRY_INTERVAL instead of the full interval)."""
        held, stranded = self.held(), self.stranded()
        with self._lock:
            entries, self._entries = self._entries, []
        try:
            if held:
                self._renew(held)
            if stranded:
                self._give_back(stranded)
            if entries:
                batch, entries = entries, []
                events.write(batch, self.keep_entries)
        except DatabaseError as exc:
            if not self.outage.noted(exc):
                log.exception("renewing leases failed")
            _close_quietly()
            return False
        finally:
            if entries:  # not tried: keep them for the next beat
                with self._lock:
                    self._entries[:0] = entries
        self.outage.ok()
        return True

    def _renew(self, keys: Iterable[Key]) -> None:
        until = timezone.now() + self.lease
        for model, pks in _by_model(keys).items():
            model._default_manager.filter(pk__in=pks, lease_owner=self.owner).update(
                lease_until=until
            )

    def _give_back(self, keys: list[Key]) -> None:
        """Unlease the stranded rows; their due time stays as it was when claimed (due), so
        the next claim, here or in another worker, takes them at once."""
        for model, pks in _by_model(keys).items():
            model._default_manager.filter(pk__in=pks, lease_owner=self.owner).update(
                lease_owner="", lease_until=None
            )
        with self._lock:
            self._stranded.difference_update(keys)
            for key in keys:
                self._held.pop(key, None)
        # Debug: the outage and its end are logged once by DatabaseOutage.
        log.debug("gave back %d object(s) whose release failed during the outage", len(keys))
        from issuance.worker.wakeup import local_wakeup

        local_wakeup.set()

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        healthy = True
        try:
            while not self._stop.is_set():
                self._poke.wait(self.interval if healthy else RETRY_INTERVAL)
                self._poke.clear()
                if self._stop.is_set():
                    break
                busy = self.held() or self.stranded() or self._entries
                healthy = self.beat() if busy else True
            # Stopping: rows and timeline entries the database refused a moment ago get one
            # last try (a stop right after an outage lost an entry kept for the next beat).
            if (self.stranded() or self._entries) and not self.beat():
                log.warning(
                    "stopped with %d row(s) not given back and %d timeline entries not stored",
                    len(self.stranded()),
                    len(self._entries),
                )
        finally:
            connections.close_all()  # this thread's connections only (they are per thread)


def _by_model(keys: Iterable[Key]) -> dict[type[Model], list[Any]]:
    grouped: dict[type[Model], list[Any]] = {}
    for model, pk in keys:
        grouped.setdefault(model, []).append(pk)
    return grouped


def _close_quietly() -> None:
    """Drop this thread's broken connection, so the next beat opens a new one."""
    try:
        connection.close()
    except DatabaseError:
        log.debug("closing a broken connection failed", exc_info=True)
