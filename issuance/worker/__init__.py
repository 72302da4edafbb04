"""The database-backed worker: claims due rows, reconciles them, gives them back.

- `wakeup`: the worker's interface to the rest of the code: `wake(obj)` ("look at this
  soon") and `notify_workers()`; the only module of this package that others import;
- `loop`: the Worker (run, tick, run_once) and the per-item pass;
- `claim`: claiming due rows with a lease, and releasing them (one path for run, tick and
  run_once);
- `heartbeat`: renews the leases of the items in flight, so a dead worker's expire soon;
- `load`: loading a claimed row with the related rows its reconcile reads;
- `listen`: waiting for wake-ups from other processes (PostgreSQL LISTEN, SQLite polling);
- `outage`: what the worker does while the database does not answer.

Nothing is imported here, so that `issuance.worker.wakeup` can be imported by models'
neighbours without loading the loop (and the controllers it imports).
"""
