"""The worker's sign of life for probes: a row per worker (issuance.models.WorkerBeat) whose
`beat_at` moves every BEAT_INTERVAL, read by `reconcile --check`.

A thread of its own, beside the lease heartbeat (issuance.worker.heartbeat), which only runs
while rows are held: an idle worker is alive too. Each beat takes a connection and gives it
back at once (an idle worker on PostgreSQL holds no server connection). A beat the database
refuses is skipped: the outage is the database's, and the worker resumes by itself once it
answers; the check reports the database's state when it cannot read the beats.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from django.db import DatabaseError, connections
from django.utils import timezone

from issuance.models import WorkerBeat

log = logging.getLogger("issuance.worker")

BEAT_INTERVAL = 10.0
# `reconcile --check` calls a worker alive when its last beat is at most this old: three
# beats, so one slow or refused beat does not fail a probe.
DEFAULT_MAX_AGE = timedelta(seconds=3 * BEAT_INTERVAL)
# Rows of workers that died without a clean stop, removed when a worker starts.
FORGET_AFTER = timedelta(days=1)


class LivenessBeat:
    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.started_at = timezone.now()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="liveness-beat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and remove this worker's row: a clean stop is not a dead worker."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        try:
            WorkerBeat.objects.filter(worker_id=self.worker_id).delete()
        except DatabaseError:
            log.debug("removing the liveness row failed", exc_info=True)

    def beat(self) -> bool:
        """One beat (the thread's; tests call it directly). False if the database refused."""
        try:
            WorkerBeat.objects.update_or_create(
                worker_id=self.worker_id,
                defaults={
                    "host": socket.gethostname()[:255],
                    "pid": os.getpid(),
                    "started_at": self.started_at,
                    "beat_at": timezone.now(),
                },
            )
            return True
        except DatabaseError:
            log.debug("liveness beat refused by the database", exc_info=True)
            return False

    def _run(self) -> None:
        try:
            WorkerBeat.objects.filter(beat_at__lt=timezone.now() - FORGET_AFTER).delete()
        except DatabaseError:
            log.debug("forgetting old liveness rows failed", exc_info=True)
        while not self._stop.is_set():
            self.beat()
            _give_back_connection()
            self._stop.wait(BEAT_INTERVAL)


def _give_back_connection() -> None:
    try:
        connections.close_all()  # this thread's own connections (they are per thread)
    except DatabaseError:
        log.debug("closing the liveness connection failed", exc_info=True)


def latest_beat() -> WorkerBeat | None:
    return WorkerBeat.objects.order_by("-beat_at").first()
