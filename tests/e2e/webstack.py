"""`manage.py serve` on a private PostgreSQL server, for database outage tests and bench/.

Plain helpers (no pytest imports):

    with serve_on_private_postgres(workdir) as stack:
        stack.call("GET", "/api/v1/certificates/")        # admin API token
        stack.call("GET", "/", session=True)              # a logged-in browser
        stack.websocket()                                  # its live-update socket
        stack.present_http01({"tok": "tok.thumbprint"})    # presented challenge rows
        stack.fetch_token("tok")
        stack.pg.stop(); ...; stack.pg.start()

The database is migrated and gets a selfSigned issuer, a superuser with an API token and
a browser session before `serve` starts (with its worker, as deployed, unless worker=False).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.pgserver import PgServer, private_postgres
from tests.e2e.servers import Process, free_port, manage_py, wait_for_tcp

HTTP01_PATH = "/.well-known/acme-challenge/"

_SETUP = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from issuance.access.apitokens import create_token
from issuance.models import Issuer
Issuer.objects.create(name="selfsigned", kind="selfSigned", spec={{"selfSigned": {{}}}})
user = User.objects.create_superuser("admin", "admin@example.test", "not-used")
create_token(user, "e2e", actor="e2e", text="{token}")
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print("SESSION=" + session.session_key)
"""

# Presented http-01 challenges of an order nothing reconciles (no due time, already
# processing, so the scheduler does not admit them either): they answer until the test ends.
_PRESENT = """
from tests.factories import make_acme_issuer, make_challenge, make_order
order = make_order(make_acme_issuer("outage"), name="outage", with_certificate=False)
for token, key in {answers!r}.items():
    make_challenge(order, "www.example.test", token=token, key=key, presented=True,
                   processing=True)
"""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ServeStack:
    pg: PgServer
    serve: Process
    port: int
    token: str
    session: str
    env: dict[str, str]
    workdir: Path

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        session: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30,
    ) -> Answer:
        """One request on a new connection; `session` sends the browser's cookie instead of
        the API token. The time is the whole exchange, connecting included."""
        sent = {"Host": "127.0.0.1", **(headers or {})}
        if session:
            sent["Cookie"] = f"sessionid={self.session}"
        elif path.startswith("/api/"):
            sent["Authorization"] = f"Token {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=sent)
            resp = conn.getresponse()
            content = resp.read()
            got = {k.lower(): v for k, v in resp.getheaders()}
            return Answer(resp.status, content, got, time.monotonic() - started)
        finally:
            conn.close()

    def fetch_token(self, token: str) -> Answer:
        """As a CA fetches it: any Host."""
        return self.call("GET", HTTP01_PATH + token, headers={"Host": "www.example.test"})

    def websocket(self, timeout: float = 30) -> Answer:
        """A logged-in page's live-update handshake: status 101 when it opens."""
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        headers = {"Cookie": f"sessionid={self.session}", "Origin": f"http://127.0.0.1:{self.port}"}
        started = time.monotonic()
        try:
            with connect(
                f"ws://127.0.0.1:{self.port}/ws/live/",
                additional_headers=headers,
                open_timeout=timeout,
            ):
                status = 101
        except InvalidStatus as exc:
            status = exc.response.status_code
        return Answer(status, b"", {}, time.monotonic() - started)

    def django(self, code: str, name: str = "shell") -> str:
        """Run `code` in `manage.py shell` against the private database; its output."""
        proc = manage_py(self.workdir, ["shell", "-c", code], self.env, name=name)
        if proc.popen.wait(120) != 0:
            raise RuntimeError(f"manage.py shell failed:\n{proc.log()[-3000:]}")
        return proc.log()

    def present_http01(self, answers: Mapping[str, str]) -> None:
        """Presented http-01 challenges, token -> key authorization (once per stack)."""
        self.django(_PRESENT.format(answers=dict(answers)), name="present")


def certificate_body(name: str) -> dict[str, Any]:
    """A certificate from the stack's selfSigned issuer (the worker issues it)."""
    return {
        "name": name,
        "spec": {
            "secretName": f"{name}-tls",
            "dnsNames": [f"{name}.example.test"],
            "issuerRef": {"name": "selfsigned", "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        },
    }


@contextlib.contextmanager
def serve_on_private_postgres(workdir: Path, *, worker: bool = True) -> Iterator[ServeStack]:
    """A private PostgreSQL server (migrated, with an admin) and `manage.py serve` on it."""
    from cryptography.fernet import Fernet

    with private_postgres(workdir) as pg:
        env = {
            "DATABASE_URL": pg.url,
            "SECRET_KEY": secrets.token_urlsafe(40),
            "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "LOG_LEVEL": "INFO",
        }
        migrate = manage_py(workdir, ["migrate", "--noinput", "-v0"], env, name="migrate")
        if migrate.popen.wait(300) != 0:
            raise RuntimeError(migrate.log())
        token = secrets.token_hex(20)
        setup = manage_py(workdir, ["shell", "-c", _SETUP.format(token=token)], env, name="setup")
        if setup.popen.wait(120) != 0:
            raise RuntimeError(setup.log())
        session = setup.log().split("SESSION=", 1)[1].split()[0]
        port = free_port()
        argv = ["serve", "--port", str(port)] + ([] if worker else ["--no-worker"])
        serve = manage_py(workdir, argv, env, name="serve")
        try:
            wait_for_tcp("127.0.0.1", port, timeout=60, process=serve)
            yield ServeStack(pg, serve, port, token, session, env, workdir)
        finally:
            serve.stop()
