"""`manage.py reconcile`: the worker (docs/architecture.md, "The worker"). SIGTERM/SIGINT stop
it cleanly."""

from __future__ import annotations

import signal
import sys
import threading
from datetime import timedelta
from types import FrameType
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from issuance.availability import is_unavailable_error, one_line
from issuance.observability import publish
from issuance.worker import liveness
from issuance.worker.loop import Worker


class Command(BaseCommand):
    help = "Run the controllers: claim due objects, reconcile them, sleep until the next is due."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            help="drain everything due now (and what that makes due), then exit",
        )
        parser.add_argument(
            "--threads", type=int, default=None, help="reconcile threads (WORKER_THREADS)"
        )
        parser.add_argument(
            "--worker-id", default=None, help="lease owner name (default host-pid-random)"
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="a probe: exit 0 if a worker beat recently (within --max-age), 1 otherwise, "
            "saying why; runs no worker",
        )
        parser.add_argument(
            "--max-age",
            type=float,
            default=liveness.DEFAULT_MAX_AGE.total_seconds(),
            help="seconds since the last beat a worker counts as alive (--check; default "
            "%(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            healthy, message = check_liveness(timedelta(seconds=options["max_age"]))
            (self.stdout if healthy else self.stderr).write(message)
            if not healthy:
                sys.exit(1)
            return
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            # Without Redis, messages published here reach no browser (the web process has
            # its own in-memory layer): don't build them.
            publish.unsubscribe_all()
        worker = Worker(worker_id=options["worker_id"], threads=options["threads"])
        if options["once"]:
            try:
                count = worker.run_once()
            finally:
                worker.close()
            self.stdout.write(f"reconciled {count} object(s)")
            return
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # Stop claiming; the batch in flight finishes, then run() returns.
            stop.set()
            worker.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"worker {worker.worker_id} running ({worker.threads} threads)")
        self.stdout.flush()
        worker.run(stop)
        self.stdout.write(f"worker {worker.worker_id} stopped after {worker.processed} item(s)")


def check_liveness(max_age: timedelta) -> tuple[bool, str]:
    """(alive, what to print) from the newest worker beat (issuance.worker.liveness)."""
    try:
        beat = liveness.latest_beat()
    except DatabaseError as exc:
        what = "unavailable" if is_unavailable_error(exc) else "error"
        return False, f"cannot read the worker beats: database {what} ({one_line(exc)})"
    if beat is None:
        return False, "no worker is running: no worker beat recorded"
    age = (timezone.now() - beat.beat_at).total_seconds()
    where = f"worker {beat.worker_id} (host {beat.host}, pid {beat.pid})"
    if age > max_age.total_seconds():
        return False, (
            f"no worker beat in the last {max_age.total_seconds():g} s: the newest is "
            f"{where}, {age:.0f} s ago"
        )
    return True, f"ok: {where} beat {age:.1f} s ago"
