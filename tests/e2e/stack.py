"""The whole product as separate processes on a database of its own, for fault scenarios
and benchmarks: Pebble and its DNS, the web app (uvicorn: REST API and HTTP-01 answers on
Pebble's HTTP-01 port) and worker processes (`manage.py reconcile`), all with the defaults
a user gets unless `env` says otherwise.

    with issuance_stack(workdir, database_url) as stack:
        stack.create_acme_issuer()
        stack.create_certificates([f"c{i}" for i in range(40)])
        stack.wait_ready(names, timeout=120)

Plain helpers (no pytest imports), like tests/e2e/servers.py.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from cryptography.fernet import Fernet

from tests.e2e.servers import (
    ChallTestSrv,
    PebbleServer,
    Process,
    free_port,
    manage_py,
    start_challtestsrv,
    start_pebble,
    start_uvicorn,
)


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"{method} {path}: {status} {body[:500]!r}")
        self.status = status
        self.body = body


class Api:
    """The REST API with a token, over plain urllib (what a script of a user would do)."""

    def __init__(self, base: str, token: str, timeout: float = 60) -> None:
        self.base = base
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(  # noqa: S310 - a loopback URL made by the caller
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ApiError(method, path, exc.code, exc.read()) from None

    def ready_count(self) -> int:
        return int(self.call("GET", "/api/v1/certificates/?state=Ready&limit=1")["count"])

    def is_ready(self, name: str) -> bool:
        cert = self.call("GET", f"/api/v1/certificates/{name}/")
        conds = cert.get("status", cert).get("conditions") or cert.get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def cert_body(name: str, issuer: str = "pebble", key: str = "ecdsa256") -> dict[str, Any]:
    """A one-name certificate; `key`: "default" (no privateKey: what a user gets), "rsa2048"
    or "ecdsa256"."""
    spec: dict[str, Any] = {
        "secretName": f"{name}-tls",
        "dnsNames": [f"{name}.bench.test"],
        "issuerRef": {"name": issuer, "kind": "Issuer"},
    }
    if key == "ecdsa256":
        spec["privateKey"] = {"algorithm": "ECDSA", "size": 256}
    elif key == "rsa2048":
        spec["privateKey"] = {"algorithm": "RSA", "size": 2048}
    return {"name": name, "spec": spec}


@dataclass
class Stack:
    workdir: Path
    database_url: str
    env: dict[str, str]
    dns: ChallTestSrv
    pebble: PebbleServer
    http_port: int
    api: Api
    web: Process | None = None
    workers: list[Process] = field(default_factory=list)

    def start_web(self) -> Process:
        self.web = start_uvicorn(self.workdir, self.http_port, self.env)
        return self.web

    def start_worker(self, *args: str, name: str | None = None) -> Process:
        name = name or (f"worker-{len(self.workers)}" if self.workers else "worker")
        worker = manage_py(self.workdir, ["reconcile", *args], self.env, name=name)
        self.workers.append(worker)
        return worker

    def create_acme_issuer(self, name: str = "pebble", timeout: float = 60) -> None:
        self.api.call(
            "POST",
            "/api/v1/issuers/",
            {
                "name": name,
                "spec": {
                    "acme": {
                        "server": self.pebble.directory_url,
                        "email": "stack@example.test",
                        "caBundle": self.pebble.ca_bundle_b64,
                        "solvers": [{"http01": {}}],
                    }
                },
            },
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            issuer = self.api.call("GET", f"/api/v1/issuers/{name}/")
            conds = issuer.get("status", issuer).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                return
            time.sleep(0.1)
        raise RuntimeError(f"issuer {name} not Ready after {timeout} s")

    def create_certificates(
        self, names: Sequence[str], issuer: str = "pebble", key: str = "ecdsa256"
    ) -> None:
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda n: self.api.call(
                        "POST", "/api/v1/certificates/", cert_body(n, issuer, key)
                    ),
                    names,
                )
            )

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database directly (the test's view, not through the app)."""
        with psycopg.connect(self.database_url, connect_timeout=5) as conn:
            return list(conn.execute(sql, params).fetchall())

    def ready_names(self) -> set[str]:
        rows = self.query("SELECT name FROM issuance_certificate WHERE state = 'Ready'")
        return {row[0] for row in rows}

    def wait_ready(self, names: Sequence[str], timeout: float) -> dict[str, float]:
        """When each certificate was first seen Ready (monotonic); raises if some never are.
        Database errors while polling (an outage under test) are waited out."""
        seen: dict[str, float] = {}
        wanted = set(names)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                now = time.monotonic()
                for name in self.ready_names() & wanted:
                    seen.setdefault(name, now)
            if len(seen) == len(wanted):
                return seen
            self.check_alive()
            time.sleep(0.25)
        missing = sorted(wanted - set(seen))
        raise AssertionError(f"{len(missing)} not Ready after {timeout} s: {missing[:10]}")

    def check_alive(self) -> None:
        for proc in [*([self.web] if self.web else []), *self.workers]:
            if not proc.alive():
                raise AssertionError(f"{proc.name} died:\n{proc.log()[-3000:]}")

    def stop(self) -> None:
        for proc in reversed([*([self.web] if self.web else []), *self.workers]):
            proc.stop()


def prepare_database(workdir: Path, env: Mapping[str, str]) -> str:
    """Migrate the database of `env` and make a superuser; returns its API token."""
    migrate = manage_py(workdir, ["migrate", "--noinput", "-v0"], env, name="migrate")
    if migrate.popen.wait(300) != 0:
        raise RuntimeError(migrate.log())
    return make_admin_token(workdir, env)


def make_admin_token(workdir: Path, env: Mapping[str, str]) -> str:
    token = secrets.token_hex(20)
    setup = manage_py(
        workdir,
        [
            "shell",
            "-c",
            "from django.contrib.auth.models import User;"
            "from issuance.access.apitokens import create_token;"
            "u=User.objects.create_superuser('stack','s@example.test','x');"
            f"create_token(u, 'e2e stack', actor='e2e', text='{token}')",
        ],
        env,
        name="setup",
    )
    if setup.popen.wait(120) != 0:
        raise RuntimeError(setup.log())
    return token


@contextlib.contextmanager
def issuance_stack(
    workdir: Path,
    database_url: str,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[Stack]:
    """Pebble, its DNS, a migrated database, the web app and `workers` worker processes."""
    dns = start_challtestsrv(workdir)
    http_port = free_port()
    pebble = start_pebble(workdir, http_port=http_port, dns_server=dns.dns_address)
    full_env = {
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(40),
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SELF_CHECK_NAMESERVERS": dns.dns_address,
        "HTTP01_SELF_CHECK_PORT": str(http_port),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        **(env or {}),
    }
    stack: Stack | None = None
    try:
        token = prepare_database(workdir, full_env)
        api = Api(f"http://127.0.0.1:{http_port}", token)
        stack = Stack(workdir, database_url, full_env, dns, pebble, http_port, api)
        stack.start_web()
        for _ in range(workers):
            stack.start_worker()
        yield stack
    finally:
        if stack is not None:
            stack.stop()
        pebble.stop()
        dns.stop()
