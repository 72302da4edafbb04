"""A background thread that lists and watches one kind of object and queues what it sees.

Used by the CSR connector (issuance/kubernetes/csr_connector/connector.py: CSRs) and by the cert-manager cluster
sync (issuance/kubernetes/certmanager/sync.py: one watcher per mirrored kind and one for Events, per
cluster). It never touches the database (the worker thread does, draining the queue): it
only talks to the API server, through two callables, `list_fn()` -> the list answer and
`watch_fn(resource_version, timeout_seconds)` -> the watch events. It survives everything
a watch can do:
- the stream ends (server timeout, apiserver restart, broken connection): it resumes
  from the last resourceVersion it saw, after a short, growing pause when it failed;
- the resourceVersion is too old (410 Gone, or an ERROR event with code 410): it lists
  again, and the consumer reconciles the full list (which also finds deletions).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from urllib3.exceptions import MaxRetryError

from issuance.kubernetes.json_client import ApiException, Obj

log = logging.getLogger("issuance.kubernetes")
WATCH_SECONDS = 60
RETRY_MIN, RETRY_MAX = 0.5, 30.0
LOG_EVERY = 20

ListFn = Callable[[], Obj]
WatchFn = Callable[[str, int], Iterable[Obj]]


@dataclass
class Batch:
    """`kind` LIST (objects = every object) or an event type (ADDED/MODIFIED/DELETED);
    `source` names the watcher that queued it when several share a queue."""

    kind: str
    objects: list[Obj] = field(default_factory=list)
    source: str = ""


class Watcher:
    def __init__(
        self,
        list_fn: ListFn,
        watch_fn: WatchFn,
        on_event: Callable[[], None] | None = None,
        watch_seconds: int = WATCH_SECONDS,
        *,
        what: str = "CSR",
        batches: queue.Queue[Batch] | None = None,
        max_pause: float = RETRY_MAX,
    ) -> None:
        self.list_fn = list_fn
        self.watch_fn = watch_fn
        self.on_event = on_event
        self.watch_seconds = watch_seconds
        self.max_pause = max_pause  # the longest pause between attempts while failing
        self.what = what  # names the batches' source, the thread and log lines
        self.queue: queue.Queue[Batch] = batches if batches is not None else queue.Queue()
        self.resource_version = ""
        self.lists = 0  # full lists done (the first, then one per 410)
        self.watches = 0  # watch streams opened
        self.failures = 0  # consecutive failures (reset when a watch ends normally)
        # Whether the last call reached the API server (False from an error until the next
        # list or watch opens), and that error: the cluster sync reads both for its state.
        self.connected = False
        self.last_error: Exception | None = None
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: object | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        name = f"kube-{self.what.lower()}-watcher"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end, closing the open watch at once (not after up to
        `watch_seconds`); stop() also waits for it."""
        self._stop.set()
        abort = getattr(self._stream, "abort", None)
        if callable(abort):
            abort()

    def stop(self, timeout: float = 5.0) -> None:
        self.request_stop()
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
                if not self.resource_version or self._relist.is_set():
                    self._relist.clear()
                    self._list()
                self._watch()
                self.failures = 0
            except Exception as exc:  # a watcher must outlive any error
                if self._stop.is_set():
                    return  # stop() aborted the stream
                self.failures += 1
                self.connected = False
                self.last_error = exc
                if self.on_event is not None:
                    self.on_event()  # the consumer may report the outage
                pause = min(self.max_pause, RETRY_MIN * 2 ** (self.failures - 1))
                # A long outage logs its start and then every LOG_EVERY-th failure, not
                # every attempt of every watcher.
                level = logging.WARNING if self.failures % LOG_EVERY in (1, 2) else logging.DEBUG
                log.log(
                    level,
                    "%s watch failed %d times (%s); retrying in %.1fs",
                    self.what,
                    self.failures,
                    brief(exc),
                    pause,
                )
                self._stop.wait(pause)

    def _list(self) -> None:
        listed = self.list_fn()
        self.connected, self.last_error = True, None
        self.resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        self._put(Batch("LIST", list(listed.get("items") or []), self.what))
        self.lists += 1  # after the put: lists >= 1 means the first list is queued

    def _watch(self) -> None:
        self.watches += 1
        ended = False  # the server closed the stream: nothing left open
        try:
            self._stream = stream = self.watch_fn(self.resource_version, self.watch_seconds)
            if self._stop.is_set():
                return  # stop() came while the watch was opening and saw no stream to close
            self.connected, self.last_error = True, None
            for event in stream:
                if self._stop.is_set() or self._relist.is_set():
                    return
                self._event(event)
            ended = True
        except ApiException as exc:
            if exc.status == 410:
                self.resource_version = ""
                return
            raise
        finally:
            abort = getattr(self._stream, "abort", None)
            if not ended and callable(abort):
                abort()  # left early: close it rather than hand a half-read connection back
            self._stream = None

    def _event(self, event: Obj) -> None:
        kind, obj = str(event.get("type") or ""), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                log.info("%s watch: resourceVersion expired (410); listing again", self.what)
                self.resource_version = ""
                raise _Expired
            raise RuntimeError(f"watch error: {obj.get('message') or obj}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._put(Batch(kind, [obj], self.what))


class _Expired(ApiException):  # type: ignore[misc]  # kubernetes 36 ships no types
    """An ERROR event with code 410, handled as an HTTP 410."""

    def __init__(self) -> None:
        super().__init__(status=410, reason="Gone")


def brief(exc: Exception) -> str:
    """One line for logs and the Clusters page: the HTTP status, or the cause of a failed
    connection (not urllib3's retry wrapper around it)."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    if isinstance(exc, MaxRetryError) and isinstance(exc.reason, Exception):
        exc = exc.reason
    return f"{type(exc).__name__}: {str(exc)[:200]}"
