"""`manage.py serve`: the console (ASGI: HTTP + WebSocket) and the worker in one process.

This is the embedded default (`make run`): one process, SQLite, in-memory channel layer —
which works because the worker publishes from this same process.
"""

from __future__ import annotations

import logging
import threading
from argparse import ArgumentParser
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand

log = logging.getLogger("issuance.serve")


class Command(BaseCommand):
    help = "Serve the web console and run the reconcile worker in the same process."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="serve only")
        parser.add_argument("--threads", type=int, default=None, help="worker threads")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        worker_thread: threading.Thread | None = None
        if not options["no_worker"]:
            from issuance.worker.loop import Worker

            worker = Worker(threads=options["threads"])
            worker_thread = threading.Thread(
                target=worker.run, args=(stop,), name="reconcile-worker", daemon=True
            )
            worker_thread.start()
        config = uvicorn.Config(
            "console.asgi:application",
            host=options["host"],
            port=options["port"],
            lifespan="off",
            # ACME validation servers fetch a token from several places at once.
            backlog=4096,
            log_level="warning",
            proxy_headers=True,
            forwarded_allow_ips=getattr(settings, "FORWARDED_ALLOW_IPS", "127.0.0.1"),
        )
        self.stdout.write(
            f"Issuance Console on http://{options['host']}:{options['port']}/"
            + ("" if options["no_worker"] else " (worker running in this process)")
        )
        try:
            uvicorn.Server(config).run()
        finally:
            stop.set()
            if worker_thread is not None:
                worker_thread.join(timeout=30)
