"""Checking a cluster: which cert-manager API versions it serves, which permissions we lack.

`check(api)` is what the sync runs when it starts syncing a cluster, every CHECK_INTERVAL,
and when someone asks ("Check now" sets Cluster.checked_at to NULL; `manage.py cluster
check` runs it at once). It makes one discovery call (GET /apis) and one
SelfSubjectAccessReview per kinds.required_access() entry, each with a timeout; the sync
runs it on a thread of its own, so the worker never waits on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from issuance.kubernetes.certmanager import kinds
from issuance.kubernetes.certmanager.cluster_api import ClusterApi
from issuance.kubernetes.json_client import ApiException
from issuance.kubernetes.watcher import brief
from issuance.models.cluster import ClusterState


@dataclass(frozen=True)
class CheckResult:
    state: str  # a ClusterState value
    api_versions: list[str] = field(default_factory=list)
    missing_permissions: list[str] = field(default_factory=list)
    error: str = ""

    def may_watch(self, kind: str) -> bool:
        """Whether list and watch on `kind` ("Event" for core Events) are not missing."""
        mirrored = kinds.BY_KIND.get(kind)
        group, plural = (mirrored.group, mirrored.plural) if mirrored else ("", "events")
        needed = (str(kinds.Access(verb, group, plural)) for verb in ("list", "watch"))
        return not any(access in self.missing_permissions for access in needed)


def state_of_error(exc: Exception) -> str:
    """How a failed call reads on the Clusters page: a refused identity is Unauthorized,
    anything else (refused connection, timeout, TLS, 5xx) Unreachable."""
    if isinstance(exc, ApiException) and exc.status in (401, 403):
        return ClusterState.UNAUTHORIZED
    return ClusterState.UNREACHABLE


def check(api: ClusterApi) -> CheckResult:
    """Discovery, then the access review (skipped when the server cannot be asked)."""
    try:
        found = api.discover()
        missing = api.missing()
    except Exception as exc:  # any failure is reported on the page, not raised
        return CheckResult(state_of_error(exc), error=brief(exc))
    if not found.has_cert_manager:
        return CheckResult(
            ClusterState.NO_CERT_MANAGER,
            found.versions,
            missing,
            f"the API server serves no {kinds.CERT_MANAGER_GROUP} API group: "
            "is cert-manager (its CustomResourceDefinitions) installed?",
        )
    return CheckResult(ClusterState.CONNECTED, found.versions, missing)
