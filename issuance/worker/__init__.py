"""The database-backed worker: claims due rows, reconciles them, gives them back.

- `loop`: the Worker (run, tick, run_once) and the per-item pass;
- `claim`: claiming due rows with a lease, and releasing them;
- `heartbeat`: renews the leases of the items in flight, so a dead worker's expire soon;
- `load`: loading a claimed row with the related rows its reconcile reads;
- `listen`: waiting for wake-ups from other processes (PostgreSQL LISTEN, SQLite polling).
"""

from __future__ import annotations

from issuance.worker.loop import Worker

__all__ = ["Worker"]
