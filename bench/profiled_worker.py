"""`manage.py reconcile` with every reconcile thread profiled (cProfile per thread, merged).

    python bench/profiled_worker.py OUT.prof     (bench/issue_many.py --profile OUT.prof)

Stops on SIGTERM/SIGINT like the real command and then writes the merged profile.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import signal
import sys
import threading
from pathlib import Path
from typing import Any
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django

django.setup()

from issuance.controllers.registry import Controller  # noqa: E402
from issuance.worker import loop as worker_module  # noqa: E402

_profiles: dict[int, cProfile.Profile] = {}
_lock = threading.Lock()
PROFILE = bool(sys.argv[1:] and sys.argv[1])
_original = worker_module.Worker.process


def _profiled(self: worker_module.Worker, ctrl: Controller, claim: worker_module.Claim) -> None:
    if not PROFILE:
        _original(self, ctrl, claim)
        return
    ident = threading.get_ident()
    with _lock:
        profile = _profiles.setdefault(ident, cProfile.Profile())
    profile.enable()
    try:
        _original(self, ctrl, claim)
    finally:
        profile.disable()


def main() -> None:
    out = sys.argv[1]
    # Every worker thread reconciles through _profiled for the life of the process.
    patch.object(worker_module.Worker, "process", _profiled).start()
    # As `manage.py reconcile`: no live-update work without a channel layer that reaches out.
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    from issuance.observability import publish

    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        publish.unsubscribe_all()
    worker = worker_module.Worker()
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.run(stop)
    stats: pstats.Stats | None = None
    for profile in _profiles.values():
        if stats is None:
            stats = pstats.Stats(profile)
        else:
            stats.add(profile)
    if stats is not None and out:
        stats.dump_stats(out)


if __name__ == "__main__":
    main()
