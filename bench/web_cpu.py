"""Benchmark: CPU of the web process (uvicorn serving console.asgi) per certificate.

    .venv/bin/python bench/web_cpu.py [N] [--db bench_web] [--rounds 3] [--pyspy out.txt]

What the web app serves per certificate in bench/issue_many.py, without Pebble or workers
(so the numbers are the web process's alone, and steady on a shared machine):

- creates: N `POST /api/v1/certificates/` (token auth) from 8 concurrent clients;
- HTTP-01: N presented tokens, each fetched 3 times at once (Pebble's VA perspectives)
  and once more (the worker's self-check), 8 tokens at a time, a new connection each;
- polls: `GET /api/v1/certificates/?state=Ready&limit=1`, as the benchmark does every 0.5 s.

Prints the web process's CPU per create, per token (4 fetches) and per poll, the create
rate, the queries per create (Django's CaptureQueriesContext, in this process), and the
total per certificate (create + token + the polls issue_many makes at 20 certificates/s).
`--pyspy FILE` records the web process with py-spy (raw format, GIL holders only).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.issue_many import cpu_seconds  # noqa: E402
from tests.e2e import stack  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432"


def request(
    port: int, method: str, path: str, token: str = "", body: Any = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": "www.bench.test" if "acme-challenge" in path else "127.0.0.1"}
    if token:
        headers["Authorization"] = f"Token {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def cert_body(name: str) -> dict[str, Any]:
    return stack.cert_body(name, issuer="bench")


def measure(pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(CPU seconds of `pid`, wall seconds) spent while `work` runs."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    work()
    return cpu_seconds(pid) - cpu0, time.monotonic() - t0


def setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("SECRET_KEY", "bench-web-cpu")
    os.environ.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
    import django

    django.setup()


def fresh_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def make_tokens(prefix: str, n: int) -> list[str]:
    """N presented http-01 challenges (one order), as the orders controller would leave them."""
    from issuance.models import Issuer
    from tests.factories import make_acme_issuer, make_challenge, make_order

    issuer = Issuer.objects.filter(name="acme").first() or make_acme_issuer()
    order = make_order(issuer, name=f"order-{prefix}")
    tokens = []
    for i in range(n):
        token = f"{prefix}-{i}-{secrets.token_urlsafe(24)}"
        make_challenge(order, f"c{i}.bench.test", token=token, presented=True)
        tokens.append(token)
    return tokens


def queries_per_create(token_user: Any) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient(HTTP_HOST="127.0.0.1")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_user}")
    client.post("/api/v1/certificates/", cert_body("q-warm"), format="json")
    with CaptureQueriesContext(connection) as ctx:
        response = client.post("/api/v1/certificates/", cert_body("q-count"), format="json")
    assert response.status_code == 201, response.content
    for query in ctx.captured_queries:
        print("    ", query["sql"][:150])
    return len(ctx.captured_queries)


def run(args: argparse.Namespace) -> int:
    from tests.e2e.servers import free_port, start_uvicorn

    db_url = f"{PG}/{args.db}"
    fresh_database(args.db)
    setup_django(db_url)
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from issuance.access.apitokens import create_token
    from issuance.models import Issuer

    call_command("migrate", "--noinput", verbosity=0)
    user = User.objects.create_superuser("bench", "b@example.test", "x")
    api_token = create_token(user, "bench", actor="bench")[1]
    Issuer.objects.create(name="bench", kind="selfSigned", spec={"selfSigned": {}})
    print(f"queries per create: {queries_per_create(api_token)}")

    workdir = Path(tempfile.mkdtemp(prefix="bench-web-", dir=REPO / "var"))
    port = free_port()
    env = {
        "DATABASE_URL": db_url,
        "SECRET_KEY": "bench-web-cpu",
        "KEY_ENCRYPTION_KEY": os.environ["KEY_ENCRYPTION_KEY"],
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    web = start_uvicorn(workdir, port, env)
    spy: subprocess.Popen[bytes] | None = None
    n = args.n
    try:
        # Warm-up: imports, URL resolvers, the pool and prepared statements.
        for i in range(20):
            request(port, "POST", "/api/v1/certificates/", api_token, cert_body(f"warm-{i}"))
            request(port, "GET", "/api/v1/certificates/?state=Ready&limit=1", api_token)
        for tok in make_tokens("warm", 10):
            request(port, "GET", f"/.well-known/acme-challenge/{tok}")
        if args.pyspy:
            spy = subprocess.Popen(
                [str(REPO / ".venv/bin/py-spy"), "record", "--gil", "--format", "raw",
                 "--rate", "200", "--pid", str(web.popen.pid), "-o", args.pyspy],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        for rnd in range(args.rounds):
            tokens = make_tokens(f"r{rnd}", n)

            def creates(rnd: int = rnd) -> None:
                def one(i: int) -> None:
                    body = cert_body(f"r{rnd}-c{i}")
                    status, text = request(port, "POST", "/api/v1/certificates/", api_token, body)
                    assert status == 201, (status, text[:300])

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(one, range(n)))

            def fetches(tokens: list[str] = tokens) -> None:
                def burst(tok: str) -> None:
                    path = f"/.well-known/acme-challenge/{tok}"
                    with ThreadPoolExecutor(3) as inner:
                        got = list(inner.map(lambda _: request(port, "GET", path), range(3)))
                    got.append(request(port, "GET", path))
                    assert all(status == 200 for status, _ in got), got

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(burst, tokens))

            def polls() -> None:
                for _ in range(args.polls):
                    status, _ = request(
                        port, "GET", "/api/v1/certificates/?state=Ready&limit=1", api_token
                    )
                    assert status == 200

            def phase(name: str, work: Callable[[], None]) -> tuple[float, float]:
                if args.only and args.only != name:
                    return 0.0, 1.0
                return measure(web.popen.pid, work)

            c_cpu, c_wall = phase("creates", creates)
            f_cpu, f_wall = phase("tokens", fetches)
            p_cpu, _ = phase("polls", polls)
            per_create = 1000 * c_cpu / n
            per_token = 1000 * f_cpu / n
            per_poll = 1000 * p_cpu / args.polls
            # issue_many polls every 0.5 s: at 20 certificates/s that is 0.1 poll per cert.
            total = per_create + per_token + 0.1 * per_poll
            print(
                f"round {rnd}: create {per_create:5.2f} ms CPU ({n / c_wall:5.1f}/s wall) | "
                f"token x4 {per_token:5.2f} ms ({f_wall:.1f} s) | poll {per_poll:5.2f} ms | "
                f"per certificate {total:5.2f} ms",
                flush=True,
            )
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        web.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=300)
    parser.add_argument("--db", default="bench_web")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--polls", type=int, default=100)
    parser.add_argument("--only", default="", choices=("", "creates", "tokens", "polls"))
    parser.add_argument("--pyspy", default="", help="py-spy raw output file for the web process")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
