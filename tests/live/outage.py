"""Redis outages with real processes: a private redis-server, `manage.py serve` using it, a
REST client that times each write, and a WebSocket client that records what it is pushed.

Plain helpers (no pytest imports) so tests and bench/faults_redis.py share them:

    redis = start_redis(workdir)                 # its own free port, no persistence
    app = start_serve(workdir, {"DATABASE_URL": ..., "REDIS_URL": redis.url, ...})
    redis.kill()     # connection refused          redis.restart()  # same port again
    redis.freeze()   # SIGSTOP: accepts, never answers   redis.thaw()
    redis.stop(); app.stop()

Never the shared Redis on 6379: an outage there would break other users of it.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.servers import Process, free_port, start_process, wait_for_tcp, wait_until

REDIS_SERVER = "/usr/bin/redis-server"
Message = dict[str, Any]


# -- redis-server -----------------------------------------------------------------------------


@dataclass
class RedisServer:
    workdir: Path
    port: int
    process: Process
    starts: int = 1

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """SIGKILL: connections reset, new ones refused."""
        self.thaw()
        self.process.kill()

    def freeze(self) -> None:
        """SIGSTOP: the kernel still accepts connections, Redis never answers."""
        self.process.popen.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.process.alive():
            self.process.popen.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """A new redis-server on the same port (empty: nothing is persisted)."""
        self.kill()
        self.starts += 1
        self.process = _redis_process(self.workdir, self.port, f"redis-{self.starts}")

    def stop(self) -> None:
        self.thaw()
        self.process.stop()


def _redis_process(workdir: Path, port: int, name: str) -> Process:
    argv = [
        REDIS_SERVER,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    proc = start_process(name, argv, workdir)
    wait_for_tcp("127.0.0.1", port, timeout=20, process=proc)
    return proc


def start_redis(workdir: Path) -> RedisServer:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return RedisServer(workdir=workdir, port=port, process=_redis_process(workdir, port, "redis"))


# -- the app --------------------------------------------------------------------------------


@dataclass
class App:
    process: Process
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.stop(timeout=20)

    def log(self) -> str:
        return self.process.log()


def start_serve(workdir: Path, env: Mapping[str, str], name: str = "serve") -> App:
    """`manage.py serve` (web + worker in one process) on a free port; `env` must hold
    DATABASE_URL, SECRET_KEY, KEY_ENCRYPTION_KEY and REDIS_URL."""
    port = free_port()
    argv = [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)]
    full_env = {"ALLOWED_HOSTS": "127.0.0.1,localhost", "DEBUG": "0", **env}
    proc = start_process(name, argv, workdir, env=full_env)
    app = App(process=proc, port=port)

    def up() -> bool:
        with urllib.request.urlopen(app.base + "/login/", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)

    wait_until(up, 60, "manage.py serve", proc)
    return app


# -- REST and pages ------------------------------------------------------------------------


@dataclass
class Api:
    base: str
    token: str = ""
    session: str = ""
    timings: list[tuple[str, float]] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        """One request; its wall time is appended to `timings` as (label, seconds)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        request = urllib.request.Request(  # noqa: S310 - our own server on 127.0.0.1
            self.base + path, data=data, method=method, headers=headers
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None
        finally:
            self.timings.append((f"{method} {path}", time.monotonic() - started))
        return json.loads(raw) if raw else None

    def page(self, path: str, timeout: float = 30) -> int:
        """GET a console page with the session cookie; the status (redirects not followed)."""
        request = urllib.request.Request(  # noqa: S310
            self.base + path, headers={"Cookie": f"sessionid={self.session}"}
        )
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=timeout) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def certificate_body(name: str, issuer: str) -> dict[str, Any]:
    return {
        "name": name,
        "spec": {
            "secretName": f"{name}-tls",
            "dnsNames": [f"{name}.outage.test"],
            "issuerRef": {"name": issuer, "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        },
    }


def is_ready(api: Api, name: str) -> bool:
    cert = api.call("GET", f"/api/v1/certificates/{name}/")
    conditions = cert.get("status", cert).get("conditions") or cert.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def time_to_ready(api: Api, name: str, issuer: str, timeout: float = 60) -> tuple[float, float]:
    """Create a certificate; (seconds the POST took, seconds until the worker made it Ready)."""
    started = time.monotonic()
    api.call("POST", "/api/v1/certificates/", certificate_body(name, issuer))
    posted = time.monotonic() - started
    wait_until(lambda: is_ready(api, name), timeout, f"certificate {name} Ready")
    return posted, time.monotonic() - started


# -- a WebSocket client ---------------------------------------------------------------------


class LiveSocket:
    """/ws/live/ with a session cookie; every message is kept with its arrival time."""

    def __init__(self, base: str, session: str) -> None:
        from websockets.sync.client import connect
        from websockets.typing import Origin

        url = base.replace("http://", "ws://") + "/ws/live/"
        self.ws = connect(
            url,
            origin=Origin(base),
            additional_headers={"Cookie": f"sessionid={session}"},
            open_timeout=10,
        ).__enter__()  # closed by close()
        self.messages: list[tuple[float, Message]] = []

    def send(self, content: Message) -> None:
        self.ws.send(json.dumps(content))

    def wait_for(self, match: Callable[[Message], bool], timeout: float, what: str) -> Message:
        """The first message from now on that matches (earlier ones are kept, not matched)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = [m for _, m in self.messages[-10:]]
                raise AssertionError(f"no {what} within {timeout:.0f} s; last messages: {seen}")
            try:
                raw = self.ws.recv(timeout=remaining)
            except TimeoutError:
                continue
            message = json.loads(raw)
            self.messages.append((time.monotonic(), message))
            if match(message):
                return dict(message)

    def subscribe(self, *topics: str) -> Message:
        self.send({"subscribe": list(topics)})
        return self.wait_for(lambda m: m.get("type") == "subscribed", 10, "subscribed reply")

    def close(self) -> None:
        self.ws.close()


def of_type(kind: str) -> Callable[[Message], bool]:
    return lambda m: m.get("type") == kind
