"""JSON-level calls to a cert-manager cluster's API server (the sync's only way in).

As issuance/kubernetes/json_client.py: objects stay plain dicts (`_preload_content=False`), so fields
the Kubernetes client's models do not know (every cert-manager field) round-trip, and
every call has a timeout (json_client.REQUEST_TIMEOUT; watches a read timeout a little above
their server timeout).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from issuance.kubernetes.certmanager import kinds
from issuance.kubernetes.certmanager.kinds import Access, Kind
from issuance.kubernetes.json_client import (
    REQUEST_TIMEOUT,
    Obj,
    WatchStream,
    json_body,
    watch_options,
)


def is_cert_manager_event(event: Obj) -> bool:
    """Whether a core Event is about an object in a cert-manager API group."""
    api_version = str((event.get("involvedObject") or {}).get("apiVersion") or "")
    return api_version.partition("/")[0] in kinds.GROUPS


class EventStream:
    """A watch on Events keeping only cert-manager ones; the others become BOOKMARKs, so the
    watcher still resumes after them."""

    def __init__(self, stream: WatchStream) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[Obj]:
        for event in self.stream:
            obj = event.get("object") or {}
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and not (
                is_cert_manager_event(obj)
            ):
                meta = obj.get("metadata") or {}
                version = meta.get("resourceVersion", "")
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}
            else:
                yield event

    def abort(self) -> None:
        self.stream.abort()


@dataclass(frozen=True)
class Discovery:
    """What GET /apis says about cert-manager: `versions` such as "cert-manager.io/v1"."""

    versions: list[str]

    @property
    def has_cert_manager(self) -> bool:
        return any(v.startswith(f"{kinds.CERT_MANAGER_GROUP}/") for v in self.versions)


class ClusterApi:
    """The calls the sync makes to one cluster (an ApiClient from kubeconfig.api_client_for)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        # Typed as Any: bodies are plain dicts and answers raw responses (see above).
        self.custom: Any = client.CustomObjectsApi(api)
        self.core: Any = client.CoreV1Api(api)
        self.authz: Any = client.AuthorizationV1Api(api)
        self.apis: Any = client.ApisApi(api)

    # -- cert-manager objects, all namespaces ------------------------------------------------
    def list_kind(self, kind: Kind) -> Obj:
        return json_body(
            self.custom.list_cluster_custom_object(
                kind.group,
                kinds.VERSION,
                kind.plural,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )

    def watch_kind(self, kind: Kind, resource_version: str, timeout_seconds: int) -> WatchStream:
        return WatchStream(
            self.custom.list_cluster_custom_object(
                kind.group,
                kinds.VERSION,
                kind.plural,
                **watch_options(resource_version, timeout_seconds),
            )
        )

    # -- core Events about cert-manager objects ------------------------------------------------
    def list_events(self) -> Obj:
        listed = json_body(
            self.core.list_event_for_all_namespaces(
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )
        listed["items"] = [e for e in listed.get("items") or [] if is_cert_manager_event(e)]
        return listed

    def watch_events(self, resource_version: str, timeout_seconds: int) -> EventStream:
        return EventStream(
            WatchStream(
                self.core.list_event_for_all_namespaces(
                    **watch_options(resource_version, timeout_seconds)
                )
            )
        )

    # -- discovery and access review ---------------------------------------------------------
    def discover(self) -> Discovery:
        """The versions of cert-manager's API groups the server serves (GET /apis)."""
        raw = self.apis.get_api_versions(_preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        groups = json_body(raw).get("groups") or []
        found: list[str] = []
        for wanted in kinds.GROUPS:
            for group in groups:
                if group.get("name") == wanted:
                    found.extend(str(v.get("groupVersion")) for v in group.get("versions") or [])
        return Discovery(found)

    def allowed(self, access: Access) -> bool:
        """A SelfSubjectAccessReview: may the kubeconfig's user do `access`?"""
        attributes = {"verb": access.verb, "group": access.group, "resource": access.resource}
        if access.subresource:
            attributes["subresource"] = access.subresource
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        answer = json_body(
            self.authz.create_self_subject_access_review(
                body,  # a plain dict: the client sends it as JSON unchanged
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
        return bool((answer.get("status") or {}).get("allowed"))

    def missing(self) -> list[str]:
        """kinds.required_access() entries the user lacks, as the Clusters page lists them."""
        return [str(access) for access in kinds.required_access() if not self.allowed(access)]
