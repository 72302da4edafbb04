"""The worker's loop: claim due rows, reconcile them on a thread pool, give them back.

Each resource row carries `due_at`. A worker claims due rows with a lease (PostgreSQL:
`SELECT … FOR UPDATE SKIP LOCKED`; SQLite: a compare-and-set UPDATE), never more than it has
free threads, runs the controllers' `reconcile`, and writes back when to look again. A
heartbeat thread keeps the leases of running items alive (issuance.worker.heartbeat), so a
dead worker's rows are free again within `WORKER_LEASE`. It sleeps until the next due time,
a wake-up in this process (issuance.worker.wakeup.local_wakeup) or a PostgreSQL NOTIFY from another
process. A database outage is waited out (issuance.worker.outage): logged once, no item
counted as failed, whatever could not be released given back when the database returns.

Used by `manage.py reconcile` and by `serve` (web and worker in one process):
`Worker().run(stop_event)`, `Worker().run_once()`, `Worker().tick()`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    connections,
)
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.utils import timezone

from issuance.controllers import registry
from issuance.controllers.base import PermanentError, Result, TemporaryError
from issuance.controllers.registry import Controller, Step
from issuance.models import Event
from issuance.observability import events
from issuance.timing.backoff import error_backoff
from issuance.worker import claim as worker_claim
from issuance.worker import trace
from issuance.worker.heartbeat import Heartbeat
from issuance.worker.listen import Listener, SqliteWatcher
from issuance.worker.liveness import LivenessBeat
from issuance.worker.load import Loaders
from issuance.worker.outage import DatabaseOutage
from issuance.worker.wakeup import local_wakeup, steps_requested

log = logging.getLogger("issuance.worker")

# Longest sleep without looking at the database: a safety net only. Other processes wake
# us with NOTIFY on PostgreSQL; on SQLite we notice their commits via PRAGMA data_version.
IDLE_CAP = 30.0
# How often a sleeping worker checks for a stop, an in-process wake-up or (SQLite) a commit.
SLICE = 0.5
# run_once() gives up after this many rounds (a controller that always asks for "now").
MAX_ONCE_ROUNDS = 10_000
# A reconcile that asks for "now" is run again at once while the lease is held (at most this
# many times in a row), instead of releasing the row and claiming it back: the next step of a
# Certificate or Challenge starts without a round trip through the queue. It continues on the
# object in hand, which the previous step kept up to date with what it stored; a change made
# by someone else meanwhile is seen at the next pass (their wake-up makes the row due again).
INLINE_STEPS = 8
# The busy loop runs the global steps (challenge scheduler, …) at least this often, and at
# once when a step asks for it (Step.urgent: a challenge was created or freed its slot).
STEP_INTERVAL = 1.0
STEP_MIN_GAP = 0.1
# While the database is unavailable, the loop looks again this often.
OUTAGE_RETRY = 1.0


@dataclass(frozen=True)
class Claim:
    pk: Any
    wake_seq: int
    error_count: int


def default_worker_id() -> str:
    return f"{socket.gethostname()[:30]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        worker_id: str | None = None,
        threads: int | None = None,
    ) -> None:
        self.worker_id = (worker_id or default_worker_id())[:64]
        self.threads = max(1, threads if threads is not None else settings.WORKER_THREADS)
        self.controllers: list[Controller] = registry.controllers()
        self.steps: list[Step] = registry.steps()
        self.processed = 0
        self._stop = threading.Event()
        # One thread: run inline, on the caller's connection (tests inside a transaction).
        self._pool = (
            ThreadPoolExecutor(self.threads, thread_name_prefix="reconcile")
            if self.threads > 1
            else None
        )
        self._turn = 0
        self._steps_at = 0.0
        self._step_ran: dict[str, float] = {}
        self._count_lock = threading.Lock()
        # Each pool thread keeps its database connection from item to item (connecting costs
        # more than a typical reconcile); they are closed when the worker idles or stops.
        self._thread_connections: dict[int, BaseDatabaseWrapper] = {}
        self._loaders = Loaders(self.worker_id)
        self.outage = DatabaseOutage()
        self.heartbeat = Heartbeat(self.worker_id, settings.WORKER_LEASE, self.outage)

    # -- running one item ----------------------------------------------------------------

    def process(self, ctrl: Controller, claim: Claim) -> None:
        """One claimed row, start to finish; it is no longer held when this returns (a
        release the database refused is stranded: the heartbeat gives it back)."""
        try:
            self._process(ctrl, claim)
        except DatabaseError as exc:  # loading the row, or a step's entries, failed
            self._database_failed(ctrl, claim, exc)
        finally:
            self.heartbeat.drop(ctrl.model, claim.pk)

    def _process(self, ctrl: Controller, claim: Claim) -> None:
        obj = self._loaders.load(ctrl.model, ctrl.related, claim.pk)
        if obj is None:
            return  # deleted, or our lease expired and someone else has it
        # This pass sees the row as read now: only a wake-up after this read is news.
        claim = Claim(claim.pk, getattr(obj, "wake_seq", claim.wake_seq), claim.error_count)
        for _ in range(INLINE_STEPS):
            after, entries = self._reconcile(ctrl, claim, obj)
            if after is None:
                return  # an error: released with its backoff
            if after.requeue_after != timedelta(0) or self._stop.is_set():
                self.release(ctrl, claim, after.requeue_after, entries=entries)
                return
            if entries:
                # The step's entries, before the next step starts.
                events.write(entries, self.heartbeat.keep_entries)
            claim = Claim(claim.pk, claim.wake_seq, 0)
        self.release(ctrl, claim, timedelta(0))

    def _reconcile(
        self, ctrl: Controller, claim: Claim, obj: Model
    ) -> tuple[Result | None, list[Event]]:
        """One reconcile and the timeline entries it recorded (written by the caller, with
        the release when the pass ends there: one statement); on an error the row is
        released with its backoff (and the entries) and None returned."""
        with self._count_lock:
            self.processed += 1
        entries: list[Event] = []
        try:
            result = self._pass(ctrl, claim, obj, entries)
        except (OperationalError, InterfaceError) as exc:
            if not self.outage.noted(exc):
                return self._failed(ctrl, claim, obj, exc, entries)
            # The database went away mid-pass: not the item's fault. Nothing is counted; the
            # row is given back due now (or stranded, and given back when the database returns).
            self.release(ctrl, claim, timedelta(0), errors=claim.error_count, entries=entries)
        except TemporaryError as exc:
            delay = exc.delay or error_backoff(claim.error_count + 1, acme=ctrl.acme_backoff)
            log.info("%s %s: temporary error, retry in %s: %s", ctrl.name, obj, delay, exc)
            self.release(
                ctrl, claim, delay, error=str(exc), errors=claim.error_count + 1, entries=entries
            )
        except PermanentError as exc:
            log.warning("%s %s: permanent error: %s", ctrl.name, obj, exc)
            self.release(
                ctrl, claim, None, error=str(exc), errors=claim.error_count + 1, entries=entries
            )
            _record_error(obj, str(exc))
        except Exception as exc:
            return self._failed(ctrl, claim, obj, exc, entries)
        else:
            return result, entries
        return None, []

    def _pass(self, ctrl: Controller, claim: Claim, obj: Model, entries: list[Event]) -> Result:
        """The controller's pass, its timeline entries collected into `entries` (written by
        the caller with the release, one statement)."""
        with trace.span(ctrl.name, claim.pk):
            try:
                with events.collected() as batch:
                    try:
                        return ctrl.reconcile(obj)
                    finally:
                        entries += batch or []
            except BaseException as exc:
                if not isinstance(exc, Exception) and entries:
                    events.write(entries)  # a simulated crash: what a step stored stays
                raise

    def _failed(
        self, ctrl: Controller, claim: Claim, obj: Model, exc: Exception, entries: list[Event]
    ) -> tuple[None, list[Event]]:
        """An unexpected error: released with the per-item error backoff. Unless the object
        was deleted during the pass (its save found no row, a child's insert found no parent):
        then there is nothing left to do or to report, and the pass ends quietly."""
        if self._deleted(ctrl, claim):
            log.info("%s %s: deleted during its pass (%s)", ctrl.name, obj, type(exc).__name__)
            self.release(ctrl, claim, None, entries=entries)  # writes the entries; no row left
            return None, []
        delay = error_backoff(claim.error_count + 1, acme=ctrl.acme_backoff)
        log.exception("%s %s: unexpected error, retry in %s", ctrl.name, obj, delay)
        self.release(
            ctrl,
            claim,
            delay,
            error=f"{type(exc).__name__}: {exc}",
            errors=claim.error_count + 1,
            entries=entries,
        )
        return None, []

    def _deleted(self, ctrl: Controller, claim: Claim) -> bool:
        try:
            return not ctrl.model._default_manager.filter(pk=claim.pk).exists()
        except DatabaseError:
            return False  # cannot tell: handled as the error it is

    def release(
        self,
        ctrl: Controller,
        claim: Claim,
        after: timedelta | None,
        *,
        error: str = "",
        errors: int = 0,
        entries: list[Event] | None = None,
    ) -> None:
        """Give the row back with its next due time, unless someone woke it meanwhile; with
        the pass's timeline entries, written in the same statement. When the database
        refuses, the row is stranded: the heartbeat gives it back once it answers."""
        at = None if after is None else timezone.now() + after
        try:
            worker_claim.release(
                ctrl.model,
                claim.pk,
                self.worker_id,
                claim.wake_seq,
                at,
                errors,
                error[:4000],
                entries or [],
                self.heartbeat.keep_entries,
            )
        except DatabaseError as exc:
            self._database_failed(ctrl, claim, exc)
        else:
            self.outage.ok()

    def _database_failed(self, ctrl: Controller, claim: Claim, exc: DatabaseError) -> None:
        """The row could not be loaded or released: leave it to the heartbeat, which gives
        it back when the database answers (an ordinary error is logged as one)."""
        if not self.outage.noted(exc):
            log.exception("%s %s: database error", ctrl.name, claim.pk)
        self.heartbeat.strand(ctrl.model, claim.pk)

    def _run_items(self, items: list[tuple[Controller, Claim]]) -> None:
        if self._pool is None:
            for ctrl, claim in items:
                self.process(ctrl, claim)
            return
        inflight: dict[Future[None], tuple[Controller, Claim]] = {
            self._pool.submit(self._process_in_thread, c, cl): (c, cl) for c, cl in items
        }
        crash: BaseException | None = None
        while inflight:
            done, _ = wait(inflight, timeout=SLICE, return_when=FIRST_COMPLETED)
            for future in done:
                del inflight[future]
                try:
                    future.result()
                except BaseException as exc:  # a simulated crash: re-raised after the batch
                    crash = crash or exc
        if crash is not None:
            raise crash

    def _process_in_thread(self, ctrl: Controller, claim: Claim) -> None:
        conn = connections[DEFAULT_DB_ALIAS]
        with self._count_lock:
            self._thread_connections[threading.get_ident()] = conn
        ok = False
        try:
            self.process(ctrl, claim)
            ok = True
        finally:
            _keep_or_close(conn, ok)
            # A thread is free: the main loop may claim more at once.
            local_wakeup.set()

    def close_thread_connections(self) -> None:
        """Close the pool threads' connections; only while no item is in flight."""
        with self._count_lock:
            conns = list(self._thread_connections.values())
            self._thread_connections.clear()
        for conn in conns:
            conn.inc_thread_sharing()  # closed from this thread; its owner is idle
            try:
                conn.close()
            except DatabaseError:
                log.debug("closing an idle thread's connection failed", exc_info=True)
            finally:
                conn.dec_thread_sharing()

    # -- loops ---------------------------------------------------------------------------

    def run_steps(self, force: bool = True) -> bool:
        """Run the global steps. With force=False (the busy loop) a step runs every
        STEP_INTERVAL, or sooner when asked for (its `urgent` event, or a request_steps()
        from this or another process), but not more often than every STEP_MIN_GAP: a burst
        of new challenges makes one scheduling pass, not many."""
        now = time.monotonic()
        asked = steps_requested.is_set()
        if asked:
            steps_requested.clear()
        periodic = force or asked or now - self._steps_at >= STEP_INTERVAL
        if periodic:
            self._steps_at = now
        did = False
        for step in self.steps:
            urgent = step.urgent is not None and step.urgent.is_set()
            recent = now - self._step_ran.get(step.name, 0.0) < STEP_MIN_GAP
            if not periodic and (not urgent or recent):
                continue
            if step.urgent is not None:
                step.urgent.clear()  # before the run: a request made during it is kept
            self._step_ran[step.name] = now
            try:
                did = bool(step.run()) or did
            except (OperationalError, InterfaceError) as exc:
                if not self.outage.noted(exc):
                    log.exception("step %s failed", step.name)
            except Exception:
                log.exception("step %s failed", step.name)
        return did

    def _urgent_step_wait(self) -> float | None:
        """Seconds until a step that asked to run may run (None: none asked)."""
        waits = [
            STEP_MIN_GAP - (time.monotonic() - self._step_ran.get(step.name, 0.0))
            for step in self.steps
            if step.urgent is not None and step.urgent.is_set()
        ]
        return max(0.0, min(waits)) if waits else None

    def tick(self) -> bool:
        """One pass: the global steps, then as many due rows as there are threads, run to
        the end (the same claim as run(), so tests exercise the production path)."""
        did = self.run_steps()
        items = [] if self._stop.is_set() else self._claim_due(self.threads)
        if items:
            self._run_items(items)
            did = True
        return did

    def run_once(self) -> int:
        """Drain everything due now (including what that work makes due), then return."""
        start = self.processed
        try:
            for _ in range(MAX_ONCE_ROUNDS):
                if self._stop.is_set() or not self.tick():
                    break
            else:
                log.warning("run_once: still busy after %d rounds", MAX_ONCE_ROUNDS)
        finally:
            self.heartbeat.stop()
        return self.processed - start

    def next_due(self) -> datetime | None:
        """The earliest moment a row becomes claimable (due and not leased)."""
        return worker_claim.next_claimable([ctrl.model for ctrl in self.controllers])

    def stop(self) -> None:
        self._stop.set()
        local_wakeup.set()

    def run(self, stop: threading.Event | None = None) -> None:
        """Work until `stop` is set (or stop() is called); in-flight items are finished.

        Unlike tick(), the loop keeps the pool full: a slow reconcile (an ACME call waiting
        on its timeout) holds one thread, not the whole batch.
        """
        if stop is not None:
            self._stop = stop
        listener = Listener() if connection.vendor == "postgresql" else None
        watcher = SqliteWatcher() if connection.vendor == "sqlite" else None
        inflight: dict[Future[None], tuple[Controller, Claim]] = {}
        log.info("worker %s started (%d threads)", self.worker_id, self.threads)
        # `reconcile --check` reads its beats (issuance.worker.liveness).
        liveness = LivenessBeat(self.worker_id)
        liveness.start()
        try:
            while not self._stop.is_set():
                local_wakeup.clear()
                try:
                    if watcher is not None:
                        watcher.mark()
                    self._reap(inflight)
                    did = self.run_steps(force=False)
                    if self._fill(inflight) or did:
                        self.outage.ok()
                        continue
                    if inflight:
                        # Set when a thread finishes or something in this process is woken.
                        step_wait = self._urgent_step_wait()
                        local_wakeup.wait(SLICE if step_wait is None else min(SLICE, step_wait))
                        continue
                    due = self.next_due()
                    self.outage.ok()
                except DatabaseError as exc:
                    self._wait_out(exc)
                    continue
                if listener is not None:
                    # Idle on PostgreSQL: don't hold a server connection for nothing. (On
                    # SQLite the connection is a local file handle, and data_version needs it.)
                    close_old_connections()
                    self.close_thread_connections()
                pause = IDLE_CAP
                if due is not None:
                    pause = min(IDLE_CAP, max(0.0, (due - timezone.now()).total_seconds()))
                step_wait = self._urgent_step_wait()
                if step_wait is not None:
                    pause = min(pause, step_wait)
                self._sleep(pause, listener, watcher)
            while inflight:  # stopping: finish what is in flight, keeping its leases
                wait(inflight, timeout=SLICE)
                self._reap(inflight)
        finally:
            liveness.stop()
            if listener is not None:
                listener.close()
            self.close()
            log.info("worker %s stopped", self.worker_id)

    def _wait_out(self, exc: DatabaseError) -> None:
        """The loop's own statement failed: an outage is logged once and looked at again
        every OUTAGE_RETRY; any other database error is logged and retried shortly."""
        if self.outage.noted(exc):
            close_old_connections()
            self._stop.wait(OUTAGE_RETRY)
        else:
            log.exception("database error; retrying in 5 s")
            close_old_connections()
            self._stop.wait(5)

    def _fill(self, inflight: dict[Future[None], tuple[Controller, Claim]]) -> bool:
        """Claim as many due rows as there are free threads and start them. True if any.

        Never more: a row claimed but waiting in a queue would be held from other workers
        for nothing, and would die with this process if it were killed.
        """
        free = 1 if self._pool is None else self.threads - len(inflight)
        if free <= 0:
            return False
        items = self._claim_due(free)
        if self._pool is None:
            for ctrl, claim in items:
                self.process(ctrl, claim)
        else:
            for ctrl, claim in items:
                future = self._pool.submit(self._process_in_thread, ctrl, claim)
                inflight[future] = (ctrl, claim)
        return bool(items)

    def _claim_due(self, free: int) -> list[tuple[Controller, Claim]]:
        """Up to `free` due rows over all controllers, held by the heartbeat from now on."""
        items = self.claim_rows(free)
        if items:
            for ctrl, claim in items:
                self.heartbeat.hold(ctrl.model, claim.pk)
            self.heartbeat.start()
        return items

    def claim_rows(self, free: int) -> list[tuple[Controller, Claim]]:
        """Lease up to `free` due rows over all controllers (issuance/worker/claim.py)."""
        now = timezone.now()
        # Where tables are claimed in turn, begin with a different one each time.
        self._turn = (self._turn + 1) % max(1, len(self.controllers))
        rows = worker_claim.claim(
            [ctrl.model for ctrl in self.controllers],
            free,
            self.worker_id,
            now,
            now + settings.WORKER_LEASE,
            start=self._turn,
            stop=self._stop,
        )
        return [(self.controllers[k], Claim(pk, seq, errors)) for k, pk, seq, errors in rows]

    def _reap(self, inflight: dict[Future[None], tuple[Controller, Claim]]) -> None:
        """Forget finished items; a crash in a thread (SimulatedCrash) ends the worker."""
        for future in [f for f in inflight if f.done()]:
            del inflight[future]
            future.result()

    def _sleep(
        self, seconds: float, listener: Listener | None, watcher: SqliteWatcher | None
    ) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and not local_wakeup.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            # In slices, so that a stop or an in-process wake-up is seen within SLICE.
            if listener is not None:
                if listener.wait(min(left, SLICE)):
                    if listener.steps_requested:  # another process asked for the steps
                        listener.steps_requested = False
                        steps_requested.set()
                    return
            elif local_wakeup.wait(min(left, SLICE)):
                return
            if watcher is not None and watcher.changed():
                return

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.heartbeat.stop()
        self.close_thread_connections()


def _keep_or_close(conn: BaseDatabaseWrapper, ok: bool) -> None:
    """After an item: keep a healthy connection for the thread's next item, else close it."""
    if conn.connection is None:
        return
    if not ok or conn.in_atomic_block:
        conn.close()
    elif conn.errors_occurred:
        if conn.is_usable():
            conn.errors_occurred = False
        else:
            conn.close()


def _record_error(obj: Model, message: str) -> None:
    kind = getattr(obj, "KIND", type(obj).__name__)
    name = str(getattr(obj, "name", obj.pk))
    certificate_name = ""
    if kind == "Certificate":
        certificate_name = name
    else:
        owner = getattr(obj, "certificate", None)
        certificate_name = str(getattr(owner, "name", "") or "")
    try:
        events.record(
            kind,
            name,
            "ReconcileError",
            message,
            type_=Event.WARNING,
            certificate_name=certificate_name,
        )
    except DatabaseError:
        log.exception("could not record the error event for %s/%s", kind, name)
