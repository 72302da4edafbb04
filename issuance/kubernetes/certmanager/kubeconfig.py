"""A Cluster's API client, from its stored (encrypted) kubeconfig.

`validate()` is what every way of adding a cluster (console form, API, `manage.py cluster
add`) calls first: a kubeconfig that cannot be used is refused with an error naming the
field, and nothing is stored.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client, config

from issuance.models import Cluster

_lock = threading.Lock()
_cache: dict[int, tuple[str, client.ApiClient]] = {}


class KubeconfigError(ValueError):
    """`field` is "kubeconfig", "context" or "in-cluster"."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _parse(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError("kubeconfig", f"not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("contexts"):
        raise KubeconfigError(
            "kubeconfig", "not a kubeconfig: it needs clusters, users and contexts"
        )
    return data


def contexts(text: str) -> list[str]:
    """The context names a kubeconfig offers."""
    return [
        str(c.get("name"))
        for c in _parse(text).get("contexts") or []
        if isinstance(c, dict) and c.get("name")
    ]


def validate(text: str, context: str = "") -> None:
    """Raise KubeconfigError unless `text` (with `context`, or its current-context) loads."""
    data = _parse(text)
    if context and context not in contexts(text):
        raise KubeconfigError(
            "context",
            f"no context {context!r} in the kubeconfig (it has: {', '.join(contexts(text))})",
        )
    if not context and not data.get("current-context"):
        raise KubeconfigError("context", "the kubeconfig has no current-context: name one")
    _check_context_refs(data, context or str(data.get("current-context")))
    api = _load(data, context)
    url = urlsplit(str(api.configuration.host or ""))
    if url.scheme not in ("http", "https") or not url.hostname:
        raise KubeconfigError(
            "kubeconfig", "the context's cluster has no usable server URL (https://host:port)"
        )


def _named(data: dict[str, Any], section: str, name: str) -> dict[str, Any] | None:
    for item in data.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def _check_context_refs(data: dict[str, Any], context: str) -> None:
    """The context must name a cluster and a user the file defines (the client's loader
    would otherwise fail later, or fall back to defaults that point nowhere)."""
    entry = _named(data, "contexts", context)
    if entry is None:
        raise KubeconfigError("context", f"no context {context!r} in the kubeconfig")
    body = entry.get("context") if isinstance(entry.get("context"), dict) else {}
    for section, key in (("clusters", "cluster"), ("users", "user")):
        ref = str((body or {}).get(key) or "")
        if not ref or _named(data, section, ref) is None:
            raise KubeconfigError(
                "context", f"context {context!r} names {key} {ref!r}, which the kubeconfig lacks"
            )


def _load(data: dict[str, Any], context: str) -> client.ApiClient:
    cfg = client.Configuration()
    try:
        loader: Any = config.load_kube_config_from_dict  # untyped in the client
        loader(data, context=context or None, client_configuration=cfg, persist_config=False)
    except (config.ConfigException, ValueError, TypeError, KeyError) as exc:
        raise KubeconfigError("kubeconfig", f"cannot be used: {exc}") from None
    # About eight threads (one watcher per kind, Events, the access check, write-backs)
    # share one client; urllib3's default pool (5 × CPUs) would drop connections on 2 cores.
    cfg.connection_pool_maxsize = 16
    return client.ApiClient(configuration=cfg)


def api_client_for(cluster: Cluster) -> client.ApiClient:
    """One ApiClient per cluster, rebuilt when its kubeconfig or context changes. An
    in-cluster one speaks as this process's ServiceAccount (its token re-read as it rotates)."""
    key = (
        "in-cluster"
        if cluster.in_cluster
        else f"{cluster.kubeconfig_ciphertext}\0{cluster.context}"
    )
    with _lock:
        cached = _cache.get(cluster.pk)
        if cached is not None and cached[0] == key:
            return cached[1]
    if cluster.in_cluster:
        # Imported here: in_cluster raises this module's KubeconfigError.
        from issuance.kubernetes.certmanager.in_cluster import ServiceAccount

        api = ServiceAccount.from_environment().api_client()
    else:
        api = _load(_parse(cluster.kubeconfig), cluster.context)
    with _lock:
        _cache[cluster.pk] = (key, api)
    return api


def forget(cluster_id: int | None = None) -> None:
    with _lock:
        if cluster_id is None:
            _cache.clear()
        else:
            _cache.pop(cluster_id, None)
