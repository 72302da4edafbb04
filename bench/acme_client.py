"""Micro-benchmark: CPU time of the ACME client per request, by kind, against real Pebble.

    .venv/bin/python bench/acme_client.py [--orders 200] [--issue 50] [--nonce-reject 5]
        [--profile out.prof] [--top 30]

Starts pebble-challtestsrv and Pebble (HTTP-01 answered by a tiny http.server in this
process), registers an account with the project's AcmeClient and then measures this
thread's CPU time (time.thread_time: the client runs in the main thread, so the HTTP-01
responder's thread and Pebble are not counted) around each client call:

- `--orders N` rounds of the calls that need no validation: newOrder, authorization
  POST-as-GET, challenge POST-as-GET, order POST-as-GET (`--threads T`: spread over T
  threads sharing the client, as the worker's threads do);
- `--issue M` full issuances as the controllers make them: newOrder, authorization,
  challenge, challenge POST {}, authorization polls until valid, finalize, order polls
  until valid, certificate download.

Prints ms CPU per call by kind and the average over all calls; a call includes its
badNonce retries (Pebble rejects 5 % of nonces by default; `--nonce-reject 0` for a clean
measurement) and the nonce HEADs it needed. DATABASE_URL (default: a PostgreSQL database
`helper_acme`, created and migrated) only backs the rate-limit pause check. CPU time, not
wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

T = TypeVar("T")


class Meter:
    """CPU time of this thread per call kind (optionally under cProfile)."""

    def __init__(self, profile: cProfile.Profile | None) -> None:
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()
        self.profile = profile

    def __call__(self, kind: str, call: Callable[..., T], *args: Any) -> T:
        if self.profile is not None:
            self.profile.enable()
        start = time.thread_time()
        try:
            return call(*args)
        finally:
            self.cpu[kind] += time.thread_time() - start
            self.calls[kind] += 1
            if self.profile is not None:
                self.profile.disable()

    def merge(self, other: Meter) -> None:
        for kind, seconds in other.cpu.items():
            self.cpu[kind] += seconds
        self.calls.update(other.calls)

    def report(self, title: str) -> None:
        print(f"\n{title}")
        print(f"  {'call':<24}{'n':>6}{'ms CPU/call':>14}")
        for kind in sorted(self.calls, key=lambda k: -self.calls[k]):
            n = self.calls[kind]
            print(f"  {kind:<24}{n:>6}{1000 * self.cpu[kind] / n:>14.3f}")
        total_n = sum(self.calls.values())
        total = sum(self.cpu.values())
        if total_n:
            print(f"  {'all calls':<24}{total_n:>6}{1000 * total / total_n:>14.3f}")


def _http01_server(port: int, answers: dict[str, str]) -> ThreadingHTTPServer:
    prefix = "/.well-known/acme-challenge/"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = answers.get(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
            data = (body or "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024  # Pebble's VA fetches each token several times at once

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _setup_django(database_url: str) -> None:
    from bench.pgdb import ensure_database

    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-secret")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    ensure_database(database_url)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _name() -> str:
    return f"{secrets.token_hex(6)}.bench.test"


def _poll(
    meter: Meter, kind: str, fetch: Callable[[str], dict[str, Any]], url: str
) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        obj = meter(kind, fetch, url)
        if obj.get("status") in ("valid", "invalid"):
            return obj
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} still {obj.get('status')} after 30 s: {obj}")
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--issue", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="threads for --orders")
    parser.add_argument("--nonce-reject", type=int, default=5, help="Pebble's badNonce %%")
    parser.add_argument("--profile", help="write a cProfile of the measured calls here")
    parser.add_argument("--top", type=int, default=0, help="print the N top functions")
    parser.add_argument(
        "--db",
        default=os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/helper_acme",
    )
    args = parser.parse_args()
    _setup_django(args.db)

    from cryptography.hazmat.primitives.asymmetric import ec
    from josepy.jwk import JWKEC

    from issuance.acme.protocol import exchange as acme_exchange
    from issuance.acme.protocol.client import AcmeClient, TLSOptions
    from issuance.acme.record import DATABASE_RECORD
    from issuance.pki.csr import build_csr
    from issuance.pki.keys import generate_private_key
    from tests.e2e.servers import free_port, start_challtestsrv, start_pebble

    (REPO / "var").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-acme-client-", dir=REPO / "var"))
    answers: dict[str, str] = {}
    http_port = free_port()
    http01 = _http01_server(http_port, answers)
    dns = start_challtestsrv(workdir)
    pebble = start_pebble(
        workdir,
        http_port=http_port,
        dns_server=dns.dns_address,
        env={"PEBBLE_WFE_NONCEREJECT": str(args.nonce_reject)},
    )
    # CPU time, as measured: a wall-clock profile would charge the waits for Pebble.
    profile = cProfile.Profile(time.thread_time) if args.profile or args.top else None
    try:
        key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
        client = AcmeClient(
            pebble.directory_url,
            key,
            "",
            TLSOptions(ca_bundle_b64=pebble.ca_bundle_b64),
            DATABASE_RECORD,  # pauses and reachability as the worker keeps them
        )
        client.new_account("bench@example.test")
        # Warm-up: connections open, caches filled, first-call imports done.
        for _ in range(3):
            order = client.new_order([("dns", _name())])
            authz = client.get_authorization(order["authorizations"][0])
            client.get_challenge(authz["challenges"][0]["url"])
            client.get_order(order["url"])

        stats_before = acme_exchange.stats()
        quick = Meter(profile)

        def rounds(meter: Meter, count: int) -> None:
            for _ in range(count):
                order = meter("new_order", client.new_order, [("dns", _name())])
                authz = meter(
                    "get_authorization", client.get_authorization, order["authorizations"][0]
                )
                chal = next(c for c in authz["challenges"] if c["type"] == "http-01")
                meter("get_challenge", client.get_challenge, chal["url"])
                meter("get_order", client.get_order, order["url"])

        if args.threads == 1:
            rounds(quick, args.orders)
        else:
            # As in the worker: threads share one client (its nonce pool and connections)
            # and contend for the GIL; each thread's own CPU time is counted.
            meters = [Meter(None) for _ in range(args.threads)]
            threads = [
                threading.Thread(target=rounds, args=(m, args.orders // args.threads))
                for m in meters
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for meter in meters:
                quick.merge(meter)
        quick.report(f"calls without validation ({args.orders} orders, {args.threads} threads)")

        full = Meter(profile)
        for _ in range(args.issue):
            name = _name()
            order = full("new_order", client.new_order, [("dns", name)])
            authz_url = order["authorizations"][0]
            authz = full("get_authorization", client.get_authorization, authz_url)
            chal = next(c for c in authz["challenges"] if c["type"] == "http-01")
            full("get_challenge", client.get_challenge, chal["url"])
            answers[chal["token"]] = client.key_authorization(chal["token"])
            full("answer_challenge", client.answer_challenge, chal["url"])
            _poll(full, "poll_authorization", client.get_authorization, authz_url)
            csr = build_csr(generate_private_key({"algorithm": "ECDSA"}), {"dnsNames": [name]})
            order = full("finalize", client.finalize, order["finalize"], csr)
            order = _poll(full, "poll_order", client.get_order, order["url"])
            full("download_certificate", client.download_certificate, order["certificate"])
        full.report(f"full issuance ({args.issue} certificates)")
        if args.issue:
            per_cert = 1000 * sum(full.cpu.values()) / args.issue
            print(f"  ms CPU per certificate: {per_cert:.2f}")
        after = acme_exchange.stats()
        print(
            "\nrequest results:",
            {k: after.get(k, 0) - stats_before.get(k, 0) for k in after},
            f"(Pebble nonce rejection {args.nonce_reject} %)",
        )
    finally:
        http01.shutdown()
        pebble.stop()
        dns.stop()
    if profile is not None:
        if args.profile:
            profile.dump_stats(args.profile)
        if args.top:
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
