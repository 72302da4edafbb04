"""Commit-to-browser latency of live updates over the Redis channel layer.

    .venv/bin/python bench/ws_latency.py [--clients 100] [--changes 200] [--interval 0.05]

1. migrates a database (DATABASE_URL, default a PostgreSQL database `ws_bench`), creates a
   viewer user, a session for it (the cookie the clients send) and one Certificate;
2. starts uvicorn serving console.asgi:application with REDIS_URL set (Redis layer);
3. connects --clients WebSocket clients (the `websockets` library) with that session
   cookie, each subscribed to "dashboard";
4. in a separate process, commits --changes Certificate saves (revision = 1, 2, …), one
   every --interval seconds, and reports the wall-clock time right after each commit;
5. for every (change, client) pair: latency = receipt time − commit time. Prints
   p50/p95/p99/max and how many deliveries arrived.

The target is p99 < 250 ms. Commit and receipt are timed with time.time() on the same
host, so the clocks agree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pgdb import ensure_database  # noqa: E402

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/ws_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/6")
os.environ.setdefault("KEY_ENCRYPTION_KEY", "bench-only-key")
os.environ.setdefault("SECRET_KEY", "bench-only-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
os.environ.setdefault("LOG_LEVEL", "WARNING")

CERT_NAME = "ws-bench"


def setup_data() -> str:
    """Migrate, make the viewer, its session and the certificate; return the session key."""
    import django

    django.setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from issuance.models import Certificate, Issuer

    call_command("migrate", verbosity=0, interactive=False)
    user, _ = User.objects.get_or_create(username="ws-bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    issuer, _ = Issuer.objects.get_or_create(
        name="ws-bench-selfsigned", defaults={"kind": "selfSigned", "spec": {"selfSigned": {}}}
    )
    Certificate.objects.get_or_create(
        name=CERT_NAME,
        defaults={
            "issuer": issuer,
            "spec": {"secretName": CERT_NAME, "dnsNames": ["ws-bench.example.test"]},
            "secret_name": CERT_NAME,
        },
    )
    Certificate.objects.filter(name=CERT_NAME).update(revision=0)
    assert session.session_key
    return session.session_key


def committer(changes: int, interval: float) -> None:
    """The separate process: commit one save per change, print {revision, committed}."""
    import django

    django.setup()
    from django.db import transaction

    from console.live import sender
    from issuance.models import Certificate

    for revision in range(1, changes + 1):
        with transaction.atomic():
            cert = Certificate.objects.select_for_update().get(name=CERT_NAME)
            cert.revision = revision
            cert.save()
        committed = time.time()  # on_commit hooks (the publish) ran inside the atomic exit
        print(json.dumps({"revision": revision, "committed": committed}), flush=True)
        time.sleep(interval)
    deadline = time.monotonic() + 10
    while sender.pending and time.monotonic() < deadline:
        time.sleep(0.01)


async def client(
    index: int,
    url: str,
    cookie: str,
    origin: str,
    received: dict[tuple[int, int], float],
    ready: asyncio.Event,
    counter: list[int],
    clients: int,
    done: asyncio.Event,
) -> None:
    import websockets
    from websockets.typing import Origin

    async with websockets.connect(
        url,
        origin=Origin(origin),
        additional_headers={"Cookie": f"sessionid={cookie}"},
        max_queue=None,
        open_timeout=30,
    ) as ws:
        await ws.send(json.dumps({"subscribe": ["dashboard"]}))
        reply = json.loads(await ws.recv())
        assert reply.get("type") == "subscribed", reply
        counter[0] += 1
        if counter[0] == clients:
            ready.set()
        while not done.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            now = time.time()
            message = json.loads(raw)
            if message.get("type") == "certificate.status" and message.get("name") == CERT_NAME:
                received[(message["revision"], index)] = now


async def run(
    args: argparse.Namespace, cookie: str
) -> tuple[dict[int, float], dict[tuple[int, int], float]]:
    url = f"ws://127.0.0.1:{args.port}/ws/live/"
    origin = f"http://127.0.0.1:{args.port}"
    received: dict[tuple[int, int], float] = {}
    ready, done = asyncio.Event(), asyncio.Event()
    counter = [0]
    tasks = [
        asyncio.create_task(
            client(i, url, cookie, origin, received, ready, counter, args.clients, done)
        )
        for i in range(args.clients)
    ]
    await asyncio.wait_for(ready.wait(), timeout=60)
    print(f"{args.clients} clients connected and subscribed to 'dashboard'", flush=True)
    await asyncio.sleep(0.5)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--commit",
        str(args.changes),
        "--interval",
        str(args.interval),
        stdout=asyncio.subprocess.PIPE,
    )
    commits: dict[int, float] = {}
    assert proc.stdout is not None
    async for line in proc.stdout:
        row = json.loads(line)
        commits[row["revision"]] = row["committed"]
    await proc.wait()
    expected = args.changes * args.clients
    deadline = time.monotonic() + 5
    while len(received) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return commits, received


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--commit", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.commit:
        committer(args.commit, args.interval)
        return

    ensure_database(os.environ["DATABASE_URL"])
    cookie = setup_data()
    print(f"database {os.environ['DATABASE_URL']}, channel layer Redis {os.environ['REDIS_URL']}")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "console.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(args.port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
    )
    try:
        import socket

        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", args.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("uvicorn did not start")
                time.sleep(0.1)
        commits, received = asyncio.run(run(args, cookie))
    finally:
        server.terminate()
        server.wait(timeout=10)

    latencies = [
        (at - commits[revision]) * 1000
        for (revision, _), at in received.items()
        if revision in commits
    ]
    expected = args.changes * args.clients
    print(f"changes committed: {len(commits)}; deliveries: {len(latencies)} of {expected}")
    if not latencies:
        sys.exit("no deliveries")
    print(
        "commit → receipt latency (ms): "
        f"p50 {percentile(latencies, 50):.1f}  p95 {percentile(latencies, 95):.1f}  "
        f"p99 {percentile(latencies, 99):.1f}  max {max(latencies):.1f}  "
        f"mean {statistics.fmean(latencies):.1f}"
    )
    p99 = percentile(latencies, 99)
    print(
        f"target p99 < 250 ms: {'met' if p99 < 250 and len(latencies) == expected else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
