"""The cluster sync: a worker Step that mirrors every Cluster's cert-manager objects.

Per pass, for every Cluster: take or renew its sync lease (one worker at a time syncs a
cluster), and for the clusters held start the watchers (one per mirrored kind and one for
Events, issuance/kubernetes/watcher.py), apply what they queued (issuance/kubernetes/certmanager/mirror.py),
keep the connection state on the Cluster row, check it (discovery + access review,
issuance/kubernetes/certmanager/cluster_check.py) when due, and carry out its due actions (writeback.run_due).

Nothing here waits on a cluster: watchers and checks run on threads of their own that never
touch the database, and tell the worker when they have something (`changed`, the Step's
urgent event, and the in-process wake-up). A ticker thread wakes the worker every
TICK seconds while there are clusters, so leases are renewed and taken over, and outages
noticed, even when no watch event arrives.

The lease (see docs/architecture.md, "cert-manager clusters"): LEASE = 15 s, renewed every
TICK = 5 s. A worker that dies (SIGKILL) stops renewing; another worker takes the cluster
over within LEASE + TICK (about 20 s), then lists everything again: nothing is lost, the
mirror is only late by that much. Longer leases only delay that recovery; shorter ones
would let a worker stalled for a few seconds (a long database statement, a paused VM) lose
its clusters for nothing. A worker that stops cleanly releases its leases at once.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from issuance.kubernetes.certmanager import kinds, kubeconfig, mirror, writeback
from issuance.kubernetes.certmanager.cluster_api import ClusterApi
from issuance.kubernetes.certmanager.cluster_check import CheckResult, check
from issuance.kubernetes.json_client import ApiException
from issuance.kubernetes.watcher import Batch, ListFn, Watcher, WatchFn, brief
from issuance.models import Cluster
from issuance.models.cluster import ClusterState
from issuance.worker.wakeup import local_wakeup

log = logging.getLogger("issuance.kubernetes.certmanager")

LEASE = timedelta(seconds=15)
TICK = 5.0  # seconds: lease renewal, takeover of expired leases, outage detection
CHECK_INTERVAL = timedelta(minutes=10)
# While a cluster is not Connected, it is checked again this often (cert-manager installed,
# a token fixed, the server back before the watchers' growing pauses end).
RECHECK_INTERVAL = timedelta(seconds=30)
MAX_BATCHES_PER_PASS = 500
# The watchers' longest pause while a cluster is unreachable (the CSR connector's is 30 s):
# once the API server is back, the mirror catches up within this. 7 watchers per cluster
# retrying every 10 s is no load for a server that is up, and nothing for one that is down.
WATCH_RETRY_MAX = 10.0
# Consecutive failures of a watcher before the cluster reads Unreachable: the first is
# usually the open stream breaking, the second a reconnect that failed too.
DOWN_AFTER = 2
EVENTS = mirror.EVENTS

# The Step's urgent event: set by watchers, checks and the ticker.
changed = threading.Event()


def wake() -> None:
    changed.set()
    local_wakeup.set()


def default_owner() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class ClusterSync:
    """One held cluster: its watchers, its check thread and their shared queue."""

    def __init__(self, cluster: Cluster, notify: Callable[[], None]) -> None:
        self.cluster_id = cluster.pk
        self.config_key = (cluster.kubeconfig_ciphertext, cluster.context)
        self.backoff = (cluster.min_backoff_seconds, cluster.max_backoff_seconds)
        self.notify = notify
        self.queue: queue.Queue[Batch] = queue.Queue()
        self.watchers: dict[str, Watcher] = {}
        self.api: ClusterApi | None = None
        self.checked: CheckResult | None = None  # the last check's result
        self._check_thread: threading.Thread | None = None
        self._check_result: CheckResult | None = None
        self.check_requested = True  # a sync starts with a check

    # -- the API client and the check thread --------------------------------------------
    def client(self, cluster: Cluster) -> ClusterApi:
        if self.api is None:
            self.api = ClusterApi(kubeconfig.api_client_for(cluster))
        return self.api

    @property
    def checking(self) -> bool:
        return self._check_thread is not None and self._check_thread.is_alive()

    def start_check(self, cluster: Cluster) -> None:
        api = self.client(cluster)
        self.check_requested = False

        def run() -> None:
            self._check_result = check(api)
            self.notify()

        self._check_thread = threading.Thread(target=run, name="cluster-check", daemon=True)
        self._check_thread.start()

    def take_check_result(self) -> CheckResult | None:
        if self.checking:
            return None
        result, self._check_result = self._check_result, None
        return result

    # -- watchers ---------------------------------------------------------------------------
    def start_watchers(self, cluster: Cluster, result: CheckResult) -> None:
        """A watcher for each kind (and Events) the check says we may list and watch."""
        api = self.client(cluster)
        for kind in [*(k.kind for k in kinds.MIRRORED), EVENTS]:
            if kind in self.watchers or not result.may_watch(kind):
                continue
            watcher = _watcher(api, kind, self.queue, self.notify)
            self.watchers[kind] = watcher
            watcher.start()

    def stop_watchers(self, wait: bool = False) -> None:
        """Stop every watcher: their open watches are closed at once and the threads end
        on their own (the step does not wait; `wait` for process shutdown)."""
        for watcher in self.watchers.values():
            watcher.request_stop()
        if wait:
            for watcher in self.watchers.values():
                watcher.stop()
        self.watchers.clear()

    def health(self) -> tuple[str, str]:
        """(state, error) from the watchers: Unreachable when one keeps failing to reach the
        server; a 403 (a permission the check reports missing) is not an outage."""
        for watcher in self.watchers.values():
            error = watcher.last_error
            if watcher.connected or error is None:
                continue
            if isinstance(error, ApiException) and error.status == 401:
                return ClusterState.UNAUTHORIZED, brief(error)
            if isinstance(error, ApiException) and error.status in (403, 404):
                continue
            if watcher.failures >= DOWN_AFTER:
                return ClusterState.UNREACHABLE, f"{watcher.what} watch: {brief(error)}"
        return ClusterState.CONNECTED, ""

    def kind_gone(self) -> bool:
        """A watch answered 404: the CRD was removed (cert-manager uninstalled?)."""
        return any(
            isinstance(w.last_error, ApiException) and w.last_error.status == 404
            for w in self.watchers.values()
        )

    def drain(self) -> list[Batch]:
        out: list[Batch] = []
        for _ in range(MAX_BATCHES_PER_PASS):
            try:
                out.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return out


def _watcher(
    api: ClusterApi, kind: str, batches: queue.Queue[Batch], notify: Callable[[], None]
) -> Watcher:
    list_fn: ListFn
    watch_fn: WatchFn
    if kind == EVENTS:
        list_fn, watch_fn = api.list_events, api.watch_events
    else:
        k = kinds.BY_KIND[kind]
        list_fn = lambda: api.list_kind(k)  # noqa: E731 - bound to this kind
        watch_fn = lambda version, seconds: api.watch_kind(k, version, seconds)  # noqa: E731
    return Watcher(list_fn, watch_fn, notify, what=kind, batches=batches, max_pause=WATCH_RETRY_MAX)


class Syncer:
    """The sync of one worker process (owner): its leases and its ClusterSyncs."""

    def __init__(self, owner: str | None = None, notify: Callable[[], None] = wake) -> None:
        self.owner = (owner or default_owner())[:128]
        self.notify = notify
        self.syncs: dict[int, ClusterSync] = {}
        self._lease_until: dict[int, datetime] = {}
        self._renewed: dict[int, float] = {}

    # -- one pass ------------------------------------------------------------------------------
    def run(self) -> bool:
        """Lease, check, drain and write back for every cluster. Returns did-work."""
        did = False
        clusters = list(Cluster.objects.all())
        for gone in set(self.syncs) - {c.pk for c in clusters}:
            self._drop(gone)  # the cluster was removed
        for cluster in clusters:
            if not self.hold(cluster):
                self._drop(cluster.pk)
                continue
            did = self._sync(cluster) or did
        return did

    def hold(self, cluster: Cluster) -> bool:
        """Take or renew the cluster's lease (a conditional UPDATE: never two owners)."""
        now = timezone.now()
        mine = cluster.sync_owner == self.owner
        taken = cluster.sync_lease_until is not None and cluster.sync_lease_until > now
        if taken and not mine:
            return False
        renewed = self._renewed.get(cluster.pk)
        if mine and renewed is not None and time.monotonic() - renewed < TICK:
            return self._lease_until.get(cluster.pk, now) > now
        free = (
            Q(sync_owner=self.owner)
            | Q(sync_owner="")
            | Q(sync_lease_until__isnull=True)
            | Q(sync_lease_until__lte=now)
        )
        until = now + LEASE
        won = Cluster.objects.filter(free, pk=cluster.pk).update(
            sync_owner=self.owner, sync_lease_until=until
        )
        if not won:
            return False
        cluster.sync_owner, cluster.sync_lease_until = self.owner, until
        self._lease_until[cluster.pk], self._renewed[cluster.pk] = until, time.monotonic()
        return True

    def _sync(self, cluster: Cluster) -> bool:
        sync = self._sync_for(cluster)
        if sync is None:
            return False
        did = self._check(cluster, sync)
        # The state first: whoever sees a mirrored row sees its cluster Connected (stored
        # after the rows, a reader could meet the first rows of a cluster still Pending).
        self._report(cluster, sync)
        batches = sync.drain()
        self._apply(cluster, sync, batches)
        if batches:
            if len(batches) == MAX_BATCHES_PER_PASS:
                self.notify()  # more queued: come back at once
            cluster.last_sync = timezone.now()
            cluster.save(update_fields=["last_sync"])
            did = True
        if cluster.state == ClusterState.CONNECTED:
            did = writeback.run_due(cluster) or did
        return did

    def _apply(self, cluster: Cluster, sync: ClusterSync, batches: list[Batch]) -> None:
        """Store the batches, each in its own transaction. An object that cannot be stored
        is logged and skipped (the others are not held up by it); when the database fails,
        what was drained is lost, so every kind is listed again once it is back."""
        for batch in batches:
            try:
                with transaction.atomic():
                    mirror.apply(cluster, batch)
            except (OperationalError, InterfaceError):
                for watcher in sync.watchers.values():
                    watcher.request_relist()
                raise
            except Exception:
                log.exception(
                    "cluster %s: could not store %s %s", cluster.name, batch.source, batch.kind
                )

    def _sync_for(self, cluster: Cluster) -> ClusterSync | None:
        """The cluster's ClusterSync, started anew when its kubeconfig or context changed."""
        sync = self.syncs.get(cluster.pk)
        if sync is not None and sync.config_key != (cluster.kubeconfig_ciphertext, cluster.context):
            self._drop(cluster.pk, release=False)
            kubeconfig.forget(cluster.pk)
            sync = None
        if sync is None:
            sync = self.syncs[cluster.pk] = ClusterSync(cluster, self.notify)
        backoff = (cluster.min_backoff_seconds, cluster.max_backoff_seconds)
        if sync.backoff != backoff:  # changed on the page or the API: retries computed again
            sync.backoff = backoff
            mirror.recompute_retries(cluster)
        return sync

    # -- checks ------------------------------------------------------------------------------
    def _check_due(self, cluster: Cluster, sync: ClusterSync) -> bool:
        if sync.checking:
            return False
        if sync.check_requested or cluster.checked_at is None:
            return True
        age = timezone.now() - cluster.checked_at
        if age >= CHECK_INTERVAL:
            return True
        unhealthy = cluster.state != ClusterState.CONNECTED or not sync.watchers or sync.kind_gone()
        return unhealthy and age >= RECHECK_INTERVAL

    def _check(self, cluster: Cluster, sync: ClusterSync) -> bool:
        """Start a check when due; apply one that finished. Returns did-work."""
        result = sync.take_check_result()
        if result is None:
            if self._check_due(cluster, sync):
                try:
                    sync.start_check(cluster)
                except kubeconfig.KubeconfigError as exc:
                    self._set(cluster, state=ClusterState.UNREACHABLE, last_error=exc.message)
            return False
        sync.checked = result
        self._set(
            cluster,
            api_versions=result.api_versions,
            missing_permissions=result.missing_permissions,
            checked_at=timezone.now(),
        )
        if result.state in (ClusterState.NO_CERT_MANAGER, ClusterState.UNAUTHORIZED):
            sync.stop_watchers()
        elif result.state == ClusterState.CONNECTED:
            sync.start_watchers(cluster, result)
        return True

    def _report(self, cluster: Cluster, sync: ClusterSync) -> None:
        """Cluster.state and last_error from the last check and the watchers."""
        checked = sync.checked
        if checked is None:
            return  # not checked yet: Pending (or what an earlier sync left)
        if checked.state != ClusterState.CONNECTED and not sync.watchers:
            self._set(cluster, state=checked.state, last_error=checked.error)
            return
        state, error = sync.health()
        if state == ClusterState.CONNECTED and checked.state != ClusterState.CONNECTED:
            # The watchers are back though the last check failed: check again (not more
            # often than every TICK, should the check keep failing while watches work).
            last = cluster.checked_at
            if last is None or (timezone.now() - last).total_seconds() >= TICK:
                sync.check_requested = True
        self._set(cluster, state=state, last_error=error)

    def _set(self, cluster: Cluster, **values: object) -> None:
        """Save only the fields that changed (the Clusters page is told on save)."""
        fields = [k for k, v in values.items() if getattr(cluster, k) != v]
        if not fields:
            return
        for name in fields:
            setattr(cluster, name, values[name])
        if "state" in fields:
            log.info("cluster %s: %s %s", cluster.name, cluster.state, cluster.last_error)
        cluster.save(update_fields=fields)

    # -- stopping --------------------------------------------------------------------------------
    def _drop(self, cluster_id: int, release: bool = True) -> None:
        sync = self.syncs.pop(cluster_id, None)
        if sync is not None:
            sync.stop_watchers()
        self._renewed.pop(cluster_id, None)
        if release and self._lease_until.pop(cluster_id, None) is not None:
            self._release([cluster_id])

    def _release(self, cluster_ids: list[int]) -> None:
        Cluster.objects.filter(pk__in=cluster_ids, sync_owner=self.owner).update(
            sync_owner="", sync_lease_until=None
        )

    def stop(self, release: bool = True) -> None:
        """Stop every watcher; release the leases (False: as a crash would, for tests)."""
        held = list(self._lease_until)
        for sync in self.syncs.values():
            sync.stop_watchers(wait=True)
        self.syncs.clear()
        self._renewed.clear()
        self._lease_until.clear()
        if release and held:
            self._release(held)


# -- the process-wide sync (the worker Step) ---------------------------------------------------

_lock = threading.Lock()
_shared: dict[str, Syncer] = {}
_ticker: list[threading.Thread] = []
_ticker_stop = threading.Event()


def shared() -> Syncer:
    with _lock:
        if "default" not in _shared:
            _shared["default"] = Syncer()
            atexit.register(shutdown)
        return _shared["default"]


def _tick() -> None:
    while not _ticker_stop.wait(TICK):
        wake()


def _start_ticker() -> None:
    with _lock:
        if _ticker and _ticker[0].is_alive():
            return
        _ticker_stop.clear()
        thread = threading.Thread(target=_tick, name="cluster-sync-ticker", daemon=True)
        _ticker[:] = [thread]
        thread.start()


def step() -> bool:
    """The worker Step: a no-op (one cheap query) while there are no clusters."""
    if not Cluster.objects.exists():
        with _lock:
            syncer = _shared.get("default")
        if syncer is not None and syncer.syncs:
            syncer.run()  # the last cluster was removed: stop its watchers
        return False
    _start_ticker()
    return shared().run()


def shutdown() -> None:
    """Stop the watchers and release this process's leases (worker stop, atexit)."""
    _ticker_stop.set()
    with _lock:
        syncer = _shared.pop("default", None)
    if syncer is not None:
        try:
            syncer.stop()
        except Exception:  # the database may be gone at exit; the leases then expire
            log.warning("releasing cluster leases failed", exc_info=True)
