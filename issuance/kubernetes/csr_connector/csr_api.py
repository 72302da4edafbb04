"""The CSR connector's calls: cluster-wide CertificateSigningRequests and core Secrets,
each with a timeout, plain dicts in and out (issuance.kubernetes.json_client says why)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from issuance.kubernetes.csr_connector.config import api_client
from issuance.kubernetes.json_client import (
    REQUEST_TIMEOUT,
    Obj,
    WatchStream,
    json_body,
    watch_options,
)


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
