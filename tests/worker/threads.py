"""Running Worker.run() in a thread, as `serve` does."""

from __future__ import annotations

import threading

from django.db import connection

from issuance.worker.loop import Worker


def run_in_thread(worker: Worker, stop: threading.Event) -> threading.Thread:
    """Start worker.run(stop) in a daemon thread that closes its connection when done."""

    def target() -> None:
        try:
            worker.run(stop)
        finally:
            connection.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread
