"""`manage.py reconcile`: the worker (docs/architecture.md, "The worker"). SIGTERM/SIGINT stop
it cleanly."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.management.base import BaseCommand, CommandParser

from issuance import publish
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

    def handle(self, *args: Any, **options: Any) -> None:
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
