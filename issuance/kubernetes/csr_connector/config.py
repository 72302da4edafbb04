"""Connector configuration from the environment; the connector is OFF unless configured.

KUBE_CONNECTOR=1         turn it on
KUBECONFIG=/path         kubeconfig file (else in-cluster service-account config)
KUBE_CONTEXT=name        kubeconfig context (default: current-context)
KUBE_SIGNER_NAMES=example.com/serving=ca-issuer,example.com/client=client-ca
                         signerName=issuerName pairs: CSRs for these signers are
                         mirrored, approved by the issuer's policy or a person, and
                         signed by that issuer. Other signers are left alone.
"""

from __future__ import annotations

import threading

from kubernetes import client, config

from issuance import environment

_lock = threading.Lock()
_cache: dict[tuple[str, str], client.ApiClient] = {}


class NotConfigured(Exception):
    pass


def enabled() -> bool:
    return environment.KUBE_CONNECTOR.value()


def signer_map() -> dict[str, str]:
    """signerName -> issuer name, from KUBE_SIGNER_NAMES."""
    out: dict[str, str] = {}
    for item in environment.KUBE_SIGNER_NAMES.value().split(","):
        signer, sep, issuer = item.strip().partition("=")
        if sep and signer.strip() and issuer.strip():
            out[signer.strip()] = issuer.strip()
    return out


def issuer_for_signer(signer_name: str) -> str | None:
    return signer_map().get(signer_name)


def api_client() -> client.ApiClient:
    """One ApiClient per (KUBECONFIG, KUBE_CONTEXT), built on first use."""
    if not enabled():
        raise NotConfigured("the Kubernetes connector is off (set KUBE_CONNECTOR=1)")
    key = (environment.KUBECONFIG.value(), environment.KUBE_CONTEXT.value())
    with _lock:
        if key in _cache:
            return _cache[key]
        cfg = client.Configuration()
        if key[0]:
            config.load_kube_config(
                config_file=key[0], context=key[1] or None, client_configuration=cfg
            )
        else:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException as exc:
                raise NotConfigured(
                    f"KUBECONFIG is not set and there is no in-cluster config: {exc}"
                ) from None
        api = client.ApiClient(configuration=cfg)
        _cache.clear()
        _cache[key] = api
        return api


def reset() -> None:
    """Forget the cached client (tests switch clusters; a kubeconfig may be rewritten)."""
    with _lock:
        _cache.clear()
