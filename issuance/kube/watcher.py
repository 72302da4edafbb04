"""A background thread that lists and watches CSRs and hands what it sees to the connector.

It never touches the database (the connector does, on the worker's thread): it only
talks to the API server and fills a queue. It survives everything a watch can do:
- the stream ends (server timeout, apiserver restart, broken connection): it resumes
  from the last resourceVersion it saw, after a short, growing pause when it failed;
- the resourceVersion is too old (410 Gone, or an ERROR event with code 410): it lists
  again, and the connector reconciles the full list (which also finds deletions).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from issuance.kube.client import ApiException, KubeApi, Obj

log = logging.getLogger("issuance.kube")
WATCH_SECONDS = 60
RETRY_MIN, RETRY_MAX = 0.5, 30.0


@dataclass
class Batch:
    """`kind` LIST (objects = every CSR) or an event type (ADDED/MODIFIED/DELETED)."""

    kind: str
    objects: list[Obj] = field(default_factory=list)


class Watcher:
    def __init__(
        self,
        api_factory: Callable[[], KubeApi],
        on_event: Callable[[], None] | None = None,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.api_factory = api_factory
        self.on_event = on_event
        self.watch_seconds = watch_seconds
        self.queue: queue.Queue[Batch] = queue.Queue()
        self.resource_version = ""
        self.lists = 0  # full lists done (the first, then one per 410)
        self.watches = 0  # watch streams opened
        self.failures = 0  # consecutive failures
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kube-csr-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def request_relist(self) -> None:
        """List everything again at the next opportunity (within one watch event or timeout)."""
        self._relist.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the loop ------------------------------------------------------------------------
    def _put(self, batch: Batch) -> None:
        self.queue.put(batch)
        if self.on_event is not None:
            self.on_event()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                api = self.api_factory()
                if not self.resource_version or self._relist.is_set():
                    self._relist.clear()
                    self._list(api)
                self._watch(api)
                self.failures = 0
            except Exception as exc:  # a watcher must outlive any error
                self.failures += 1
                pause = min(RETRY_MAX, RETRY_MIN * 2 ** (self.failures - 1))
                log.warning("CSR watch failed (%s); retrying in %.1fs", _brief(exc), pause)
                self._stop.wait(pause)

    def _list(self, api: KubeApi) -> None:
        listed = api.list_csrs()
        self.resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        self._put(Batch("LIST", list(listed.get("items") or [])))
        self.lists += 1  # after the put: lists >= 1 means the first list is queued

    def _watch(self, api: KubeApi) -> None:
        self.watches += 1
        try:
            for event in api.watch_csrs(self.resource_version, self.watch_seconds):
                if self._stop.is_set() or self._relist.is_set():
                    return
                kind, obj = str(event.get("type") or ""), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        log.info("CSR watch: resourceVersion expired (410); listing again")
                        self.resource_version = ""
                        return
                    raise RuntimeError(f"watch error: {obj.get('message') or obj}")
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.resource_version = str(version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._put(Batch(kind, [obj]))
        except ApiException as exc:
            if exc.status == 410:
                self.resource_version = ""
                return
            raise


def _brief(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
