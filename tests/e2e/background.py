"""The real worker loop in a thread of the test process, and a viewer to read pages as.

For end-to-end tests that act on real servers (stop, freeze, restart them) while the worker
runs with its defaults (WORKER_THREADS threads), and that read what it did from the
database or from this process's counters. Threads need their own database connections:
use with PostgreSQL (mark the test `postgres`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from issuance.roles import VIEWER
from issuance.worker import Worker


@contextlib.contextmanager
def running_worker() -> Iterator[Worker]:
    worker = Worker()
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), name="worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(90)
        assert not thread.is_alive(), "the worker did not stop"


def make_viewer(username: str = "e2e-viewer") -> Any:
    """A user with the viewer role."""
    from django.contrib.auth.models import User

    from tests.factories import role_group

    user = User.objects.create_user(username=username)
    user.groups.add(role_group(VIEWER))
    return user
