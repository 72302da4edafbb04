"""Thin, JSON-level access to the Kubernetes API (certificates.k8s.io/v1 CSRs, core Secrets).

Objects stay plain dicts (`_preload_content=False`): the connector must read CSRs from
API servers older and newer than the client's models (spec.expirationSeconds exists only
since 1.22), and a dict round-trips fields the client does not know.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from issuance.kube.config import REQUEST_TIMEOUT, api_client

Obj = dict[str, Any]

__all__ = ["ApiException", "KubeApi", "Obj", "WatchStream", "json_body", "watch_options"]


def watch_timeout(timeout_seconds: int) -> tuple[float, float]:
    """(connect, read) for a watch the server closes after `timeout_seconds`: the read timeout
    is a little longer, so a silently dead connection cannot hang a watcher forever."""
    return (REQUEST_TIMEOUT[0], timeout_seconds + 10)


def watch_options(resource_version: str, timeout_seconds: int) -> dict[str, Any]:
    """The keyword arguments of a watch call (any list_* method of the client)."""
    return {
        "watch": True,
        "resource_version": resource_version,
        "allow_watch_bookmarks": True,
        "timeout_seconds": timeout_seconds,
        "_preload_content": False,
        "_request_timeout": watch_timeout(timeout_seconds),
    }


class WatchStream:
    """An open watch (the request is made when this is built, so opening errors are raised
    there): iterate its events; `abort()`, from another thread, ends the iteration at once
    instead of waiting up to the server timeout."""

    def __init__(self, response: Any) -> None:
        self.response = response

    def __iter__(self) -> Iterator[Obj]:
        try:
            buffer = b""
            for chunk in self.response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        finally:
            self.response.release_conn()

    def abort(self) -> None:
        # urllib3's shutdown() interrupts a read blocked in another thread.
        with contextlib.suppress(Exception):
            self.response.shutdown()


def json_body(response: Any) -> Obj:
    """The JSON of an unpreloaded (`_preload_content=False`) answer."""
    data = response.data if hasattr(response, "data") else response.read()
    loaded: Obj = json.loads(data)
    return loaded


class KubeApi:
    """The handful of calls the connector makes; each has a timeout."""

    def __init__(self, api: client.ApiClient | None = None) -> None:
        self.api = api or api_client()
        # Typed as Any: bodies are plain dicts and answers raw responses (see above).
        self.certs: Any = client.CertificatesV1Api(self.api)
        self.core: Any = client.CoreV1Api(self.api)

    # -- CertificateSigningRequests -----------------------------------------------------
    def list_csrs(self) -> Obj:
        return json_body(
            self.certs.list_certificate_signing_request(
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def read_csr(self, name: str) -> Obj:
        return json_body(
            self.certs.read_certificate_signing_request(
                name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def replace_csr_approval(self, name: str, body: Obj) -> Obj:
        return json_body(
            self.certs.replace_certificate_signing_request_approval(
                name, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def replace_csr_status(self, name: str, body: Obj) -> Obj:
        return json_body(
            self.certs.replace_certificate_signing_request_status(
                name, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def watch_csrs(self, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Watch events ({type, object}) from `resource_version`; ends after the timeout."""
        return WatchStream(
            self.certs.list_certificate_signing_request(
                **watch_options(resource_version, timeout_seconds)
            )
        )

    # -- Secrets ------------------------------------------------------------------------
    def read_secret(self, namespace: str, name: str) -> Obj:
        return json_body(
            self.core.read_namespaced_secret(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def create_secret(self, namespace: str, body: Obj) -> Obj:
        return json_body(
            self.core.create_namespaced_secret(
                namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )

    def replace_secret(self, namespace: str, name: str, body: Obj) -> Obj:
        return json_body(
            self.core.replace_namespaced_secret(
                name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )
