"""In-cluster mode: an ApiClient for the cluster the console runs in, from its ServiceAccount.

What a pod has, and nothing pasted: the token, CA and namespace Kubernetes mounts in
KUBE_SERVICEACCOUNT_DIR (/var/run/secrets/kubernetes.io/serviceaccount) and the API server
in KUBERNETES_SERVICE_HOST/PORT. The token is a projected one that the kubelet replaces
before it expires (an hour by default), so it is never kept: the client's refresh hook,
called before each request, stats the file and reads it again when it changed (the kubelet
swaps a symlink, so the inode changes; a test rewriting the file changes the mtime).
The client library's own in-cluster loader re-reads only once a minute and on fixed paths.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from issuance import environment
from issuance.kubernetes.certmanager.kubeconfig import KubeconfigError

FIELD = "in-cluster"


@dataclass(frozen=True)
class ServiceAccount:
    """Where this process's ServiceAccount and API server are (read from the environment
    now, so tests can point them elsewhere)."""

    directory: Path
    host: str
    port: str

    @classmethod
    def from_environment(cls) -> ServiceAccount:
        return cls(
            Path(environment.KUBE_SERVICEACCOUNT_DIR.value()),
            environment.KUBERNETES_SERVICE_HOST.value(),
            environment.KUBERNETES_SERVICE_PORT.value(),
        )

    @property
    def token_path(self) -> Path:
        return self.directory / "token"

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def url(self) -> str:
        # An IPv6 service address needs brackets in a URL.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def namespace(self) -> str:
        try:
            return (self.directory / "namespace").read_text().strip()
        except OSError:
            return ""

    def validate(self) -> None:
        """Raise KubeconfigError (field "in-cluster") unless this process can speak to its
        cluster as its ServiceAccount: outside a pod (or with the token not mounted) the
        error says what is missing."""
        if not self.host or not self.port:
            raise KubeconfigError(
                FIELD,
                "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: this process "
                "does not run in a Kubernetes pod (add the cluster with a kubeconfig instead)",
            )
        for path, what in ((self.token_path, "token"), (self.ca_path, "CA certificate")):
            try:
                text = path.read_text()
            except OSError as exc:
                raise KubeconfigError(
                    FIELD,
                    f"cannot read the ServiceAccount {what} at {path}: {exc.strerror} (is "
                    "automountServiceAccountToken on for this pod?)",
                ) from None
            if not text.strip():
                raise KubeconfigError(FIELD, f"the ServiceAccount {what} at {path} is empty")

    def api_client(self) -> client.ApiClient:
        self.validate()
        cfg = client.Configuration()
        cfg.host = self.url
        cfg.ssl_ca_cert = str(self.ca_path)
        token = _Token(self.token_path)
        # The whole header value under the client's own key (v36 reads "BearerToken"; its
        # prefix table would be looked up under that name too).
        cfg.api_key = {"BearerToken": token.header()}
        cfg.refresh_api_key_hook = token.refresh
        # As kubeconfig._load: about eight threads share one client.
        cfg.connection_pool_maxsize = 16
        return client.ApiClient(configuration=cfg)


class _Token:
    """The token file's content, read again whenever the file is replaced or rewritten."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def _stamp(self) -> tuple[int, int, int]:
        st = os.stat(self.path)  # follows the kubelet's ..data symlink
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def read(self) -> str:
        with self._lock:
            try:
                stamp = self._stamp()
            except OSError:
                # Mid-swap or gone: keep the token we have; the API server will say if it
                # is no longer valid (Unauthorized, as for any kubeconfig).
                return self._token
            if stamp != self._seen:
                text = self.path.read_text().strip()
                if text:
                    self._token, self._seen = text, stamp
            return self._token

    def header(self) -> str:
        return f"Bearer {self.read()}"

    def refresh(self, cfg: client.Configuration) -> None:
        cfg.api_key["BearerToken"] = self.header()
