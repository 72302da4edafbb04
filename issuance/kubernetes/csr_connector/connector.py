"""The Kubernetes connector: mirror CSRs, write decisions and certificates back, export Secrets.

Runs either as a worker Step (registered in issuance.controllers.registry; a no-op unless
KUBE_CONNECTOR=1) or alone with `manage.py kube_connector`. Each pass is short: it drains
what the watcher thread queued (database work only), then makes the writes that are due,
each with a timeout, and returns. Signing is not done here: a mirrored request is an
ordinary CertificateRequest for the mapped issuer, signed by the CertificateRequest
controller like any other once approved.

Each pass also stores the watcher's connection state (KubeConnectorState: connected or
unreachable since when, failures in a row, the last error) when it changed, so that the
"cluster unreachable" notification works from any worker process, not only this one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from issuance.kubernetes.csr_connector import config, csr_mirror, csr_writeback, secret_export
from issuance.kubernetes.csr_connector.csr_api import KubeApi
from issuance.kubernetes.watcher import WATCH_SECONDS, Batch, Watcher, brief
from issuance.models import KubeConnectorState, KubeCSR
from issuance.worker.wakeup import local_wakeup

log = logging.getLogger("issuance.kubernetes.csr_connector")
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
        # The connection state last stored (connected, failures, error); None: not yet.
        self._stored: tuple[bool, int, str] | None = None

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
        self._store_state()
        did = self._drain()
        did = self._write_back() or did
        return self._export_secrets() or did

    def _store_state(self) -> None:
        """Store the watcher's connection state when it changed (at most one small write per
        failed attempt while the API server is down: the watcher's pauses grow to 30 s)."""
        watcher = self.watcher
        if watcher.connected:
            state = (True, 0, "")
        elif watcher.last_error is not None:
            state = (False, watcher.failures, brief(watcher.last_error))
        else:
            return  # starting: no call has answered or failed yet
        if state == self._stored:
            return
        connected, failures, error = state
        with transaction.atomic():
            row, _ = KubeConnectorState.objects.select_for_update().get_or_create(name="default")
            changed = row.mark_reachable(connected, timezone.now())
            row.connected, row.failures, row.last_error = connected, failures, error
            row.save()
        if changed:
            log.log(
                logging.INFO if connected else logging.WARNING,
                "Kubernetes connector: %s",
                "API server reachable again" if connected else f"API server unreachable: {error}",
            )
        self._stored = state

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
                csr_mirror.observe(obj)
            csr_mirror.forget_missing(present)
        elif batch.kind == "DELETED":
            for obj in batch.objects:
                csr_mirror.forget(obj)
        else:
            for obj in batch.objects:
                csr_mirror.observe(obj)

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
            *(
                ("decision", row, csr_writeback.write_decision)
                for row in csr_writeback.due_decisions()
            ),
            *(
                ("certificate", row, csr_writeback.write_certificate)
                for row in csr_writeback.due_certificates()
            ),
        ]
        for what, row, write in jobs:
            key = (what, row.pk)
            if not self._may_try(key):
                continue
            try:
                self.conflicts += write(self.api, row)
            except Exception as exc:  # recorded on the row, retried later
                csr_writeback.record_failure(row, exc)
                self._failed(key)
                continue
            self._retry_at.pop(key, None)
            did = True
        return did

    def _export_secrets(self) -> bool:
        did = False
        for cert, record in secret_export.due_exports():
            did = secret_export.export(self.api, cert, record) or did
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


def csr_watcher(
    api_factory: Callable[[], KubeApi],
    on_event: Callable[[], None] | None = None,
    watch_seconds: int = WATCH_SECONDS,
) -> Watcher:
    """The CSR connector's watcher (cluster-wide CertificateSigningRequests)."""
    return Watcher(
        lambda: api_factory().list_csrs(),
        lambda version, seconds: api_factory().watch_csrs(version, seconds),
        on_event,
        watch_seconds,
        what="CSR",
    )
