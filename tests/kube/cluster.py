"""A real Kubernetes control plane for tests: Debian's etcd + kube-apiserver v1.20.2.

The kube-apiserver binary is built once per machine by scripts/build-kube-apiserver.sh
(`make kube-apiserver`). Plain helpers, no pytest imports:

    cluster = start_cluster(workdir)       # etcd + apiserver, waits for /readyz
    cluster.kubeconfig                     # admin kubeconfig (static token, system:masters)
    cluster.restart_apiserver()            # SIGKILL + start again, same etcd and port
    cluster.stop()
"""

from __future__ import annotations

import base64
import os
import secrets
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.e2e.servers import Process, free_port, start_process, wait_for_tcp, wait_until

ETCD = "/usr/bin/etcd"
KUBE_VERSION = "v1.20.2"
CACHE_ROOT = Path(os.environ.get("KUBE_CACHE_DIR") or "/var/cache/issuance-console/kube")


def apiserver_binary() -> Path | None:
    explicit = os.environ.get("KUBE_APISERVER")
    path = (
        Path(explicit) if explicit else CACHE_ROOT / f"{KUBE_VERSION}-reflect2" / "kube-apiserver"
    )
    return path if path.is_file() and os.access(path, os.X_OK) else None


def etcd_binary() -> Path | None:
    return Path(ETCD) if os.access(ETCD, os.X_OK) else None


@dataclass
class Cluster:
    workdir: Path
    etcd: Process
    etcd_port: int
    apiserver: Process
    port: int
    admin_token: str
    kubeconfig: Path
    startup_seconds: float = 0.0  # how long start_cluster took (etcd, apiserver, ready)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_path(self) -> Path:
        return self.workdir / "certs" / "apiserver.crt"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_path))

    def get(self, path: str) -> tuple[int, bytes]:
        req = urllib.request.Request(  # noqa: S310 - https URL we built
            self.url + path, headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5, context=self.ssl_context()) as resp:  # noqa: S310
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_ready(self, timeout: float = 120) -> None:
        def ready() -> bool:
            status, body = self.get("/readyz")
            return status == 200 and body.strip() == b"ok"

        wait_until(ready, timeout, "kube-apiserver /readyz", self.apiserver)

    def start_apiserver(self) -> None:
        self.apiserver = _start_apiserver(self.workdir, self.port, self.etcd_port)
        self.wait_ready()

    def kill_apiserver(self) -> None:
        self.apiserver.kill()

    def restart_apiserver(self) -> None:
        self.kill_apiserver()
        self.start_apiserver()

    def stop(self) -> None:
        self.apiserver.stop()
        self.etcd.stop()


def _start_etcd(workdir: Path) -> tuple[Process, int]:
    client_port, peer_port = free_port(), free_port()
    data = workdir / "etcd-data"
    argv = [
        ETCD,
        "--name=test",
        f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{client_port}",
        f"--advertise-client-urls=http://127.0.0.1:{client_port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
        "--log-level=warn",
        "--logger=zap",
    ]
    proc = start_process("etcd", argv, workdir)
    wait_for_tcp("127.0.0.1", client_port, timeout=30, process=proc)
    return proc, client_port


def _service_account_keys(workdir: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_path, pub_path = workdir / "sa.key", workdir / "sa.pub"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pub_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key_path, pub_path


def _start_apiserver(workdir: Path, port: int, etcd_port: int) -> Process:
    binary = apiserver_binary()
    assert binary is not None, "kube-apiserver is not built (make kube-apiserver)"
    argv = [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        "--insecure-port=0",
        f"--cert-dir={workdir / 'certs'}",
        f"--token-auth-file={workdir / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        f"--service-account-key-file={workdir / 'sa.pub'}",
        f"--service-account-signing-key-file={workdir / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/24",
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        "--watch-cache=true",
        "--v=1",
    ]
    proc = start_process("kube-apiserver", argv, workdir)
    wait_for_tcp("127.0.0.1", port, timeout=120, process=proc)
    return proc


def write_kubeconfig(path: Path, url: str, ca_pem: bytes, token: str) -> None:
    ca = base64.b64encode(ca_pem).decode()
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {url}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    token: {token}
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
"""
    )


def start_cluster(
    workdir: Path, extra_tokens: dict[str, tuple[str, list[str]]] | None = None
) -> Cluster:
    """etcd + kube-apiserver; `extra_tokens`: token -> (username, groups) for test users."""
    workdir.mkdir(parents=True, exist_ok=True)
    admin_token = secrets.token_hex(16)
    lines = [f'{admin_token},admin,admin-uid,"system:masters"']
    for i, (token, (user, groups)) in enumerate((extra_tokens or {}).items()):
        lines.append(f'{token},{user},uid-{i},"{",".join(groups)}"')
    (workdir / "tokens.csv").write_text("\n".join(lines) + "\n")
    _service_account_keys(workdir)
    etcd, etcd_port = _start_etcd(workdir)
    port = free_port()
    started = time.monotonic()
    try:
        apiserver = _start_apiserver(workdir, port, etcd_port)
    except Exception:
        etcd.stop()
        raise
    kubeconfig = workdir / "kubeconfig"
    cluster = Cluster(workdir, etcd, etcd_port, apiserver, port, admin_token, kubeconfig)
    try:
        wait_until(cluster.ca_path.exists, 60, "apiserver self-signed certificate", apiserver)
        write_kubeconfig(kubeconfig, cluster.url, cluster.ca_path.read_bytes(), admin_token)
        cluster.wait_ready()
    except Exception:
        cluster.stop()
        raise
    cluster.startup_seconds = time.monotonic() - started
    return cluster
