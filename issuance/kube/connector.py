"""The Kubernetes connector: mirror CSRs, write decisions and certificates back, export Secrets.

Runs either as a worker Step (registered in issuance.controllers.registry; a no-op unless
KUBE_CONNECTOR=1) or alone with `manage.py kube_connector`. Each pass is short: it drains
what the watcher thread queued (database work only), then makes the writes that are due,
each with a timeout, and returns. Signing is not done here: a mirrored request is an
ordinary CertificateRequest for the mapped issuer, signed by the CertificateRequest
controller like any other once approved.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from issuance.kube import config, mirror, secrets, writeback
from issuance.kube.client import KubeApi
from issuance.kube.watcher import Batch, csr_watcher
from issuance.models import KubeCSR
from issuance.worker.wakeup import local_wakeup

log = logging.getLogger("issuance.kube")
MAX_BATCHES_PER_PASS = 500
# In-memory pause after a failed write-back (the API server may be down for a while).
WRITE_RETRY_MIN, WRITE_RETRY_MAX = 1.0, 300.0


class Connector:
    def __init__(
        self,
        api_factory: Callable[[], KubeApi] = KubeApi,
        watch_seconds: int | None = None,
        wake: Callable[[], None] | None = local_wakeup.set,
    ) -> None:
        self.api_factory = api_factory
        kwargs = {"watch_seconds": watch_seconds} if watch_seconds else {}
        self.watcher = csr_watcher(api_factory, on_event=wake, **kwargs)
        self._api: KubeApi | None = None
        self._retry_at: dict[tuple[str, int], tuple[float, int]] = {}
        self.conflicts = 0  # 409s met and retried (for tests and logs)

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = self.api_factory()
        return self._api

    def start(self) -> None:
        self.watcher.start()

    def stop(self) -> None:
        self.watcher.stop()

    def wait_listed(self, timeout: float) -> bool:
        """Start watching and wait until the first full list is queued (for one-shot runs)."""
        self.watcher.start()
        deadline = time.monotonic() + timeout
        while self.watcher.lists < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.watcher.lists >= 1

    # -- one pass --------------------------------------------------------------------------
    def sync(self) -> bool:
        """Apply what the watcher saw, then write what is due. Returns did-work."""
        self.watcher.start()  # (re)started if it died
        did = self._drain()
        did = self._write_back() or did
        return self._export_secrets() or did

    def _drain(self) -> bool:
        did = False
        for _ in range(MAX_BATCHES_PER_PASS):
            try:
                batch = self.watcher.queue.get_nowait()
            except queue.Empty:
                break
            self._apply(batch)
            did = True
        return did

    def _apply(self, batch: Batch) -> None:
        if batch.kind == "LIST":
            present = set()
            for obj in batch.objects:
                present.add(str((obj.get("metadata") or {}).get("uid") or ""))
                mirror.observe(obj)
            mirror.forget_missing(present)
        elif batch.kind == "DELETED":
            for obj in batch.objects:
                mirror.forget(obj)
        else:
            for obj in batch.objects:
                mirror.observe(obj)

    def _may_try(self, key: tuple[str, int]) -> bool:
        at, _ = self._retry_at.get(key, (0.0, 0))
        return time.monotonic() >= at

    def _failed(self, key: tuple[str, int]) -> None:
        _, count = self._retry_at.get(key, (0.0, 0))
        pause = min(WRITE_RETRY_MAX, WRITE_RETRY_MIN * 2**count)
        self._retry_at[key] = (time.monotonic() + pause, count + 1)

    def _write_back(self) -> bool:
        did = False
        jobs: list[tuple[str, KubeCSR, Callable[[KubeApi, KubeCSR], int]]] = [
            *(("decision", row, writeback.write_decision) for row in writeback.due_decisions()),
            *(
                ("certificate", row, writeback.write_certificate)
                for row in writeback.due_certificates()
            ),
        ]
        for what, row, write in jobs:
            key = (what, row.pk)
            if not self._may_try(key):
                continue
            try:
                self.conflicts += write(self.api, row)
            except Exception as exc:  # recorded on the row, retried later
                writeback.record_failure(row, exc)
                self._failed(key)
                continue
            self._retry_at.pop(key, None)
            did = True
        return did

    def _export_secrets(self) -> bool:
        did = False
        for cert, record in secrets.due_exports():
            did = secrets.export(self.api, cert, record) or did
        return did


# -- the process-wide connector (worker Step and management command) ----------------------

_lock = threading.Lock()
_connector: dict[str, Connector] = {}


def shared() -> Connector:
    with _lock:
        if "default" not in _connector:
            _connector["default"] = Connector()
        return _connector["default"]


def shutdown() -> None:
    with _lock:
        conn = _connector.pop("default", None)
    if conn is not None:
        conn.stop()
    config.reset()


def step() -> bool:
    """The worker Step: a no-op unless KUBE_CONNECTOR=1."""
    if not config.enabled():
        return False
    try:
        return shared().sync()
    except config.NotConfigured as exc:
        log.error("Kubernetes connector: %s", exc)
        return False
