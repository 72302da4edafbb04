"""Benchmark: Redis (the channel layer) unavailable, with the default settings.

    .venv/bin/python bench/faults_redis.py [--writes 20] [--db bench_faults_redis]

Starts a private redis-server (its own port, never the shared one) and `manage.py serve`
(web + worker) using it on a fresh PostgreSQL database, with a WebSocket client subscribed
to the dashboard. Then, for Redis up, Redis killed (connection refused) and Redis stopped
with SIGSTOP (accepts connections, never answers): --writes REST writes (create a
certificate, force-renew it, alternately) timed one by one, and the console pages loaded.
After each outage Redis comes back (restarted on the same port, or SIGCONT) while a write
is made every 0.1 s; the time until the first push reaches the WebSocket is measured, and
until the server says "resumed".

Prints write latency (median/max) per Redis state, seconds from Redis returning to the
first push and to "resumed", seconds from the failure to "paused", and how many requests
were made and how many log lines the outages cost. `run()` returns the same numbers (for
bench/faults.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402

from tests.e2e.servers import manage_py  # noqa: E402
from tests.live.outage import (  # noqa: E402
    Api,
    App,
    LiveSocket,
    RedisServer,
    certificate_body,
    of_type,
    start_redis,
    start_serve,
)

PG = "postgresql://postgres@127.0.0.1:5432"
ISSUER = "selfsigned"
Numbers = dict[str, float | int | str]

SETUP = """
import json
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Group, User
from django.contrib.sessions.backends.db import SessionStore
from issuance.access.apitokens import create_token
from issuance.specs.issuer import apply_issuer
apply_issuer("selfsigned", {"selfSigned": {}}, actor="bench")
operator = User.objects.create_user("bench-operator")
operator.groups.add(Group.objects.get(name="operator"))
viewer = User.objects.create_user("bench-viewer")
viewer.groups.add(Group.objects.get(name="viewer"))
session = SessionStore()
session[SESSION_KEY] = str(viewer.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = viewer.get_session_auth_hash()
session.create()
print(json.dumps({"token": create_token(operator, "bench", actor="bench")[1],
                  "session": session.session_key}))
"""


def fresh_database(name: str) -> str:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{PG}/{name}"


def _manage(workdir: Path, args: list[str], env: dict[str, str], name: str) -> str:
    proc = manage_py(workdir, args, env, name=name)
    if proc.popen.wait(300) != 0:
        raise RuntimeError(proc.log())
    return proc.log()


@dataclass
class Outage:
    writes: list[float]  # seconds per write during the outage
    paused: float  # failure -> the socket told "paused"
    push: float  # Redis back -> first push on the socket
    resumed: float  # Redis back -> the socket told "resumed"


class Scenario:
    def __init__(self, app: App, api: Api, redis: RedisServer, ws: LiveSocket) -> None:
        self.app, self.api, self.redis, self.ws = app, api, redis, ws
        self.count = 0
        self.pages = 0

    def write(self) -> float:
        """Create a certificate or force-renew the last one, alternately; seconds taken."""
        self.count += 1
        started = time.monotonic()
        if self.count % 2:
            body = certificate_body(f"w{self.count:04d}", ISSUER)
            self.api.call("POST", "/api/v1/certificates/", body)
        else:
            self.api.call("POST", f"/api/v1/certificates/w{self.count - 1:04d}/renew/")
        return time.monotonic() - started

    def writes_and_pages(self, n: int) -> list[float]:
        times = [self.write() for _ in range(n)]
        for path in ("/", "/certificates/"):
            status = self.api.page(path)
            if status != 200:
                raise RuntimeError(f"{path} answered {status} with Redis {self.redis.url}")
            self.pages += 1
        return times

    def outage(self, n: int, fail: Callable[[], None], mend: Callable[[], None]) -> Outage:
        started = time.monotonic()
        fail()
        times = self.writes_and_pages(n // 2)
        self.ws.wait_for(of_type("paused"), 30, "'paused'")
        paused = time.monotonic() - started
        times += self.writes_and_pages(n - n // 2)  # the sender has given up by now
        seen = len(self.ws.messages)
        mend()
        back = time.monotonic()
        first_push = resumed = 0.0
        while not (first_push and resumed):
            if time.monotonic() - back > 60:
                raise RuntimeError("no push within 60 s of Redis returning")
            self.write()
            self._drain(0.1)
            for at, message in self.ws.messages[seen:]:
                if message.get("type") == "resumed" and not resumed:
                    resumed = at - back
                if message.get("group") and not first_push:
                    first_push = at - back
        return Outage(writes=times, paused=paused, push=first_push, resumed=resumed)

    def _drain(self, seconds: float) -> None:
        """Collect what arrives in the next `seconds` (into ws.messages)."""
        with contextlib.suppress(AssertionError):
            self.ws.wait_for(lambda m: False, seconds, "nothing")


def _ms(values: list[float]) -> tuple[float, float]:
    return round(statistics.median(values) * 1000, 1), round(max(values) * 1000, 1)


def run(writes: int = 20, db: str = "bench_faults_redis") -> Numbers:
    (REPO / "var").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="faults-redis-", dir=REPO / "var"))
    redis = start_redis(workdir / "redis")
    env = {
        "DATABASE_URL": fresh_database(db),
        "SECRET_KEY": secrets.token_urlsafe(40),
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "REDIS_URL": redis.url,
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    app: App | None = None
    try:
        _manage(workdir, ["migrate", "--noinput", "-v0"], env, "migrate")
        ids = json.loads(_manage(workdir, ["shell", "-c", SETUP], env, "setup").splitlines()[-1])
        app = start_serve(workdir, env)
        api = Api(app.base, token=ids["token"], session=ids["session"])
        ws = LiveSocket(app.base, ids["session"])
        try:
            ws.subscribe("dashboard")
            scenario = Scenario(app, api, redis, ws)
            up = scenario.writes_and_pages(writes)
            refused = scenario.outage(writes, redis.kill, redis.restart)
            frozen = scenario.outage(writes, redis.freeze, redis.thaw)
        finally:
            ws.close()
        log = app.log()
        numbers: Numbers = {}
        for label, times in (("up", up), ("refused", refused.writes), ("frozen", frozen.writes)):
            median, worst = _ms(times)
            numbers[f"write ms, Redis {label} (median / max)"] = f"{median} / {worst}"
        for label, result in (("refused", refused), ("frozen", frozen)):
            numbers[f"Redis {label}: failure -> 'paused' (s)"] = round(result.paused, 1)
            numbers[f"Redis {label}: back -> first push (s)"] = round(result.push, 1)
            numbers[f"Redis {label}: back -> 'resumed' (s)"] = round(result.resumed, 1)
        numbers["writes"] = scenario.count
        numbers["page loads (all 200)"] = scenario.pages
        numbers["REST requests"] = len(api.timings)
        # Two outages: one line each way from the publisher and from the browsers' monitor.
        for text in (
            "live updates paused",
            "live updates resumed",
            "live updates to browsers paused",
            "live updates to browsers resumed",
        ):
            numbers[f"log lines '{text}'"] = log.count(text)
        numbers["log tracebacks"] = log.count("Traceback")
        numbers["logs"] = str(workdir)
        return numbers
    finally:
        if app is not None:
            app.stop()
        redis.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=20, help="writes per Redis state")
    parser.add_argument("--db", default="bench_faults_redis", help="PostgreSQL database (dropped)")
    args = parser.parse_args()
    for key, value in run(args.writes, args.db).items():
        print(f"  {key:<48} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
