"""Rows of mirrored cert-manager objects, as issuance/kubernetes/certmanager/mirror.py stores them, for the
live-update and metrics tests (which need the rows, not a cluster to read them from)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from issuance.models import Cluster, ClusterEvent, ClusterResource, ClusterState, RoleScope
from tests import factories


def make_cluster(name: str, state: str = ClusterState.CONNECTED, **fields: Any) -> Cluster:
    return factories.make_cluster(name, state=state, **fields)


def certificate_row(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    ready: str = "True",
    not_after: datetime | None = None,
    failed_attempts: int = 0,
    next_retry_at: datetime | None = None,
    kind: str = "Certificate",
    state: str = "",
) -> ClusterResource:
    """An unsaved row (for bulk_create or save())."""
    return ClusterResource(
        cluster=cluster,
        kind=kind,
        namespace=namespace,
        name=name,
        uid=f"uid-{cluster.name}-{namespace}-{kind}-{name}",
        resource_version="1",
        body={"metadata": {"name": name, "namespace": namespace}, "spec": {}, "status": {}},
        ready=ready,
        reason="Ready" if ready == "True" else "Failed",
        state=state,
        certificate_name=name if kind == "Certificate" else "",
        not_after=not_after,
        failed_attempts=failed_attempts,
        next_retry_at=next_retry_at,
    )


def make_certificate_row(cluster: Cluster, namespace: str, name: str, **kw: Any) -> ClusterResource:
    row = certificate_row(cluster, namespace, name, **kw)
    row.save()
    return row


def make_event(cluster: Cluster, namespace: str, name: str, reason: str) -> ClusterEvent:
    return ClusterEvent.objects.create(
        cluster=cluster,
        uid=f"ev-{cluster.name}-{namespace}-{name}-{reason}",
        namespace=namespace,
        involved_kind="Certificate",
        involved_name=name,
        type="Warning",
        reason=reason,
        message=f"{reason} for {name}",
    )


def scoped_user(
    make_user: Callable[..., User], username: str, role: str, *scopes: tuple[Cluster, str]
) -> User:
    """A user holding `role` only inside (cluster, namespace) pairs ("" = whole cluster)."""
    user = make_user(username, role)
    for cluster, namespace in scopes:
        RoleScope.objects.create(user=user, cluster=cluster, namespace=namespace)
    return user
