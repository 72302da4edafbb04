"""Helpers for the sync tests: add a Cluster, run sync passes until something holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from issuance.kubernetes.certmanager.sync import Syncer
from issuance.models import Cluster, ClusterResource
from tests.factories import make_cluster as add_cluster
from tests.helpers import wait_for

__all__ = ["add_cluster", "row", "row_if", "running_syncer", "state", "sync_until"]

T = TypeVar("T")


def sync_until(
    syncer: Syncer, check: Callable[[], T | None], timeout: float = 30, what: str = ""
) -> T:
    """Run sync passes (as the worker's step does) until `check()` is truthy; its value."""

    def synced() -> T | None:
        syncer.run()
        return check()

    return wait_for(synced, timeout, what or repr(check), poll=0.05)


def row(cluster: Cluster, kind: str, namespace: str, name: str) -> ClusterResource | None:
    return ClusterResource.objects.filter(
        cluster=cluster, kind=kind, namespace=namespace, name=name
    ).first()


def state(cluster: Cluster) -> str:
    return str(Cluster.objects.values_list("state", flat=True).get(pk=cluster.pk))


def row_if(
    cluster: Cluster,
    kind: str,
    namespace: str,
    name: str,
    test: Callable[[ClusterResource], object],
) -> ClusterResource | None:
    """The row, once `test(row)` holds."""
    found = row(cluster, kind, namespace, name)
    return found if found is not None and test(found) else None


def running_syncer() -> Iterator[Syncer]:
    """A worker's sync (for a fixture), with the default lease, check interval and watch
    timings; stopped (leases released) after the test."""
    s = Syncer(owner="worker-1")
    yield s
    s.stop()
