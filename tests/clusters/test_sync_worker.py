"""The sync as the worker runs it (the registered Step, in a real worker loop on its own
thread and database connection)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection

from issuance.kubernetes.certmanager import sync
from issuance.models import Cluster
from issuance.models.cluster import ClusterState
from issuance.worker.loop import Worker
from tests.clusters import cm
from tests.clusters.conftest import CmCluster
from tests.clusters.syncing import row, row_if, state
from tests.factories import make_cluster as add_cluster
from tests.helpers import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.django_db(transaction=True)]


class RunningWorker:
    def __init__(self) -> None:
        self.worker = Worker(threads=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-worker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.worker.run(self._stop)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.fixture
def worker() -> Iterator[RunningWorker]:
    running = RunningWorker()
    yield running
    running.stop()
    sync.shutdown()  # what the process does at exit: watchers stopped, leases released


def at_version(cluster: Cluster, namespace: str, version: str) -> Callable[[], object]:
    return lambda: row_if(
        cluster, "Certificate", namespace, "timed", lambda r: r.resource_version == version
    )


def test_worker_step_mirrors_changes_and_releases_on_shutdown(
    cm_a: CmCluster, namespace: str, worker: RunningWorker
) -> None:
    assert any(step.run is sync.step for step in worker.worker.steps)
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    a = cm_a.objects()
    obj = a.create(cm.certificate("timed", namespace))
    wait_for(lambda: row(prod, "Certificate", namespace, "timed"), 30, "mirrored by the worker")
    assert state(prod) == ClusterState.CONNECTED
    assert Cluster.objects.get(pk=prod.pk).sync_owner == sync.shared().owner
    delays = []
    for attempts in range(1, 21):
        # Changes spaced out, as people and cert-manager make them (back to back, each
        # would land within the worker's 0.1 s minimum gap between two runs of a step).
        time.sleep(0.35)  # not a multiple of the loop's 0.5 s sleep slice: all phases sampled
        started = time.monotonic()
        obj = a.set_status(obj, cm.failed_status(attempts, cm.now()))
        version = obj["metadata"]["resourceVersion"]
        wait_for(at_version(prod, namespace, version), 10, "change mirrored", poll=0.005)
        delays.append(time.monotonic() - started)
    median = statistics.median(delays)
    print(
        f"\nchange -> row via the worker: median {median * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms"
    )
    assert median < 1.0


def test_shutdown_releases_the_lease(cm_a: CmCluster, worker: RunningWorker) -> None:
    prod = add_cluster("prod", cm_a.console_kubeconfig)
    wait_for(lambda: Cluster.objects.get(pk=prod.pk).sync_owner, 30, "lease taken")
    # The lease is stored before the sync is registered: look it up only once it exists.
    wait_for(
        lambda: (found := sync.shared().syncs.get(prod.pk)) is not None and found.watchers,
        30,
        "watching",
    )
    watchers = list(sync.shared().syncs[prod.pk].watchers.values())
    worker.stop()
    sync.shutdown()
    held = Cluster.objects.get(pk=prod.pk)
    assert (held.sync_owner, held.sync_lease_until) == ("", None)
    assert watchers and all(not w.alive for w in watchers)
