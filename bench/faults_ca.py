"""Benchmark: issuance while the ACME CA, or the self-check's DNS server, is away.

    .venv/bin/python bench/faults_ca.py [--minutes 5] [--certificates 20]
                                        [--variants frozen,refused,dns] [--db bench_faults_ca]

Starts pebble-challtestsrv, Pebble and `manage.py serve` (web app and worker in one
process, default settings: its /metrics counts the requests sent to each CA) on a fresh
PostgreSQL database, registers an issuer and issues a first certificate, then per variant:

- frozen: N certificates are created, Pebble is stopped with SIGSTOP as soon as the first
  of their orders exists, for --minutes, then SIGCONT;
- refused: the same through a TCP forwarder in front of Pebble (its own issuer), whose port
  is closed for --minutes (connections refused, open ones cut), then opened again;
- dns: pebble-challtestsrv (the self-check's resolver) is killed before a certificate is
  created and restarted on the same ports after --dns-seconds.

Prints, per CA variant: the requests sent to the CA during the outage (the per-CA counter
of /metrics: requests that got no answer, which during an outage is every one) and the
failed requests the outage record counted (every worker's; here one process), seconds from the first
failed call (and from going away) to the issuer's API showing the CA unreachable, seconds
from the CA's return to every certificate Ready, orders failed, certificates in issuance
backoff, and orders the CA made beyond ours (from Pebble's log: duplicates). For dns: the
challenge's reason while down, its failed checks, and seconds from the DNS server's return
to the self-check passing. `run()` returns the same as a dict (for bench/faults.py).
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402

from bench.issue_many import PG, fresh_database  # noqa: E402
from tests.e2e.servers import (  # noqa: E402
    CHALLTESTSRV,
    ChallTestSrv,
    PebbleServer,
    Process,
    free_port,
    manage_py,
    start_challtestsrv,
    start_pebble,
    start_process,
    wait_for_tcp,
)
from tests.e2e.stack import Api, cert_body, prepare_database  # noqa: E402
from tests.e2e.tcpproxy import TcpProxy  # noqa: E402
from tests.helpers import wait_for  # noqa: E402

Result = dict[str, float | int | str]


@dataclass
class Stack:
    workdir: Path
    db: str
    dns: ChallTestSrv
    pebble: PebbleServer
    http_port: int
    serve: Process
    api: Api

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(f"{PG}/{self.db}") as conn:
            return list(conn.execute(query, params).fetchall())


def start_stack(db: str, workdir: Path) -> Stack:
    fresh_database(db)
    dns = start_challtestsrv(workdir)
    http_port = free_port()
    pebble = start_pebble(workdir, http_port=http_port, dns_server=dns.dns_address)
    env = {
        "DATABASE_URL": f"{PG}/{db}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SELF_CHECK_NAMESERVERS": dns.dns_address,
        "HTTP01_SELF_CHECK_PORT": str(http_port),
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    token = prepare_database(workdir, env)
    serve = manage_py(workdir, ["serve", "--port", str(http_port)], env, name="serve")
    wait_for_tcp("127.0.0.1", http_port, timeout=60, process=serve)
    api = Api(f"http://127.0.0.1:{http_port}", token)
    return Stack(workdir, db, dns, pebble, http_port, serve, api)


def unanswered(stack: Stack, server: str) -> int:
    """Requests the serving process sent to `server` that got no answer, from /metrics
    (during an outage that is every request sent; "ok" and other answers are not)."""
    url = f"http://127.0.0.1:{stack.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith("issuance_acme_server_requests_total{"):
            continue
        if f'server="{server}"' in line and (
            'result="timeout"' in line or 'result="network_error"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def make_issuer(stack: Stack, name: str, server: str) -> None:
    stack.api.call(
        "POST",
        "/api/v1/issuers/",
        {
            "name": name,
            "spec": {
                "acme": {
                    "server": server,
                    "email": "bench@example.test",
                    "caBundle": stack.pebble.ca_bundle_b64,
                    "solvers": [{"http01": {}}],
                }
            },
        },
    )
    wait_for(lambda: issuer_ready(stack, name), 60, f"issuer {name} ready")


def issuer_status(stack: Stack, name: str) -> dict[str, Any]:
    return dict(stack.api.call("GET", f"/api/v1/issuers/{name}/")["status"])


def issuer_ready(stack: Stack, name: str) -> bool:
    conds = issuer_status(stack, name)["conditions"] or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def create(stack: Stack, issuer: str, names: list[str]) -> None:
    for name in names:
        stack.api.call("POST", "/api/v1/certificates/", cert_body(name, issuer))


def ready_count(stack: Stack, names: list[str]) -> int:
    rows = stack.sql(
        "SELECT count(*) FROM issuance_certificate WHERE name = ANY(%s) AND state = 'Ready'",
        names,
    )
    return int(rows[0][0])


def pebble_orders(stack: Stack) -> int:
    return stack.pebble.process.log().count("Added order")


def shown_unreachable(stack: Stack, issuer: str) -> datetime | None:
    """When the CA's outage began, once the issuer's API says unreachable and CAUnreachable."""
    status = issuer_status(stack, issuer)
    ready: dict[str, Any] = next(
        (c for c in status["conditions"] or [] if c.get("type") == "Ready"), {}
    )
    ca = status.get("ca") or {}
    if ca.get("reachable", True) or ready.get("reason") != "CAUnreachable":
        return None
    return datetime.fromisoformat(str(ca["unreachableSince"]).replace("Z", "+00:00"))


def ca_outage(
    stack: Stack,
    prefix: str,
    server: str,
    go_down: Callable[[], None],
    come_back: Callable[[], None],
    minutes: float,
    n: int,
) -> Result:
    issuer = f"pebble-{prefix}"
    make_issuer(stack, issuer, server)
    create(stack, issuer, [f"{prefix}-warm"])
    wait_for(lambda: ready_count(stack, [f"{prefix}-warm"]) == 1, 60, "warm-up certificate")
    names = [f"{prefix}-{i}" for i in range(n)]
    orders_at_ca_before = pebble_orders(stack)
    create(stack, issuer, names)
    first_order = (
        "SELECT count(*) FROM issuance_order o JOIN issuance_certificaterequest r"
        " ON o.request_id = r.id JOIN issuance_certificate c ON r.certificate_id = c.id"
        " WHERE c.name = ANY(%s) AND o.url <> ''"
    )
    wait_for(lambda: stack.sql(first_order, names)[0][0], 60, "a first order", poll=0.01)
    before = unanswered(stack, server)
    go_down()
    down_wall, down = time.time(), time.monotonic()
    pending = n - ready_count(stack, names)
    since = wait_for(lambda: shown_unreachable(stack, issuer), 120, "shown unreachable", poll=0.2)
    shown_wall = time.time()
    print(f"  {prefix}: down; shown unreachable {shown_wall - since.timestamp():.1f}s after the")
    print(f"  first failed call; holding the outage for {minutes:g} min", flush=True)
    time.sleep(max(0.0, minutes * 60 - (time.monotonic() - down)))
    during = unanswered(stack, server) - before
    failed = int(issuer_status(stack, issuer)["ca"]["failedRequests"])
    come_back()
    back = time.monotonic()
    wait_for(lambda: ready_count(stack, names) == n, 600, "every certificate Ready", poll=0.2)
    ready_after = time.monotonic() - back
    failed_orders = stack.sql(
        "SELECT count(*) FROM issuance_order WHERE failure_time IS NOT NULL OR state <> 'valid'"
    )[0][0]
    in_backoff = stack.sql(
        "SELECT count(*) FROM issuance_certificate WHERE name = ANY(%s)"
        " AND (next_retry_time IS NOT NULL OR failed_issuance_attempts > 0)",
        names,
    )[0][0]
    ours = stack.sql(
        "SELECT count(*) FROM issuance_order o JOIN issuance_certificaterequest r"
        " ON o.request_id = r.id JOIN issuance_certificate c ON r.certificate_id = c.id"
        " WHERE c.name = ANY(%s)",
        names,
    )[0][0]
    return {
        f"{prefix}_outage_minutes": minutes,
        f"{prefix}_pending_at_outage": pending,
        f"{prefix}_requests_during_outage": during,
        f"{prefix}_failed_requests_recorded": failed,
        f"{prefix}_shown_after_first_failure_s": round(shown_wall - since.timestamp(), 1),
        f"{prefix}_shown_after_down_s": round(shown_wall - down_wall, 1),
        f"{prefix}_ready_after_return_s": round(ready_after, 1),
        f"{prefix}_orders": int(ours),
        f"{prefix}_orders_failed": int(failed_orders),
        f"{prefix}_certificates_in_backoff": int(in_backoff),
        f"{prefix}_duplicate_orders_at_ca": pebble_orders(stack) - orders_at_ca_before - ours,
    }


def restart_challtestsrv(dns: ChallTestSrv, workdir: Path) -> None:
    argv = [CHALLTESTSRV, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""]
    argv += ["-dns01", f"127.0.0.1:{dns.dns_port}"]
    argv += ["-management", f"127.0.0.1:{dns.management_port}"]
    argv += ["-http01", "", "-https01", "", "-tlsalpn01", ""]
    dns.process = start_process("challtestsrv", argv, workdir)
    wait_for_tcp("127.0.0.1", dns.dns_port, process=dns.process)


def challenge(stack: Stack, dns_name: str) -> tuple[str, str, int] | None:
    rows = stack.sql(
        "SELECT state, reason, attempts FROM issuance_challenge WHERE dns_name = %s", dns_name
    )
    return (str(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None


def dns_outage(stack: Stack, seconds: float) -> Result:
    name = "dns-down"
    dns_name = f"{name}.bench.test"
    make_issuer(stack, "pebble-dns", stack.pebble.directory_url)
    stack.dns.process.kill()
    create(stack, "pebble-dns", [name])

    def failing() -> tuple[str, str, int] | None:
        row = challenge(stack, dns_name)
        return row if row and row[1].startswith("self check failed") else None

    reason = wait_for(failing, 120, "the self-check failing")[1]
    print(f"  dns: self-check failing: {reason}", flush=True)
    time.sleep(seconds)
    row = challenge(stack, dns_name)
    assert row is not None, "the challenge wait_for saw is gone"
    failed_checks = row[2]
    restart_challtestsrv(stack.dns, stack.workdir)
    back = time.monotonic()
    wait_for(
        lambda: (row := challenge(stack, dns_name)) and row[0] in ("processing", "valid"),
        120,
        "the self-check passing",
        poll=0.1,
    )
    passed_after = time.monotonic() - back
    wait_for(lambda: ready_count(stack, [name]) == 1, 120, "the certificate Ready")
    return {
        "dns_outage_seconds": seconds,
        "dns_failed_checks": failed_checks,
        "dns_passed_after_back_s": round(passed_after, 1),
        "dns_reason": reason,
    }


def run(
    minutes: float = 5.0,
    certificates: int = 20,
    variants: tuple[str, ...] = ("frozen", "refused", "dns"),
    dns_seconds: float = 60.0,
    db: str = "bench_faults_ca",
) -> Result:
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-ca-", dir=REPO / "var"))
    print(f"logs in {workdir}", flush=True)
    stack = start_stack(db, workdir)
    result: Result = {}
    proxy: TcpProxy | None = None
    try:
        if "frozen" in variants:
            result |= ca_outage(
                stack,
                "frozen",
                stack.pebble.directory_url,
                lambda: stack.pebble.process.popen.send_signal(signal.SIGSTOP),
                lambda: stack.pebble.process.popen.send_signal(signal.SIGCONT),
                minutes,
                certificates,
            )
        if "refused" in variants:
            proxy = TcpProxy(("127.0.0.1", stack.pebble.port))
            server = f"https://127.0.0.1:{proxy.port}/dir"
            result |= ca_outage(
                stack, "refused", server, proxy.down, proxy.up, minutes, certificates
            )
        if "dns" in variants:
            result |= dns_outage(stack, dns_seconds)
        if not stack.serve.alive():
            raise RuntimeError("serve died:\n" + stack.serve.log()[-3000:])
        return result
    finally:
        if stack.pebble.process.alive():
            stack.pebble.process.popen.send_signal(signal.SIGCONT)
        if proxy is not None:
            proxy.stop()
        stack.serve.stop()
        stack.pebble.stop()
        stack.dns.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="CA outage length")
    parser.add_argument("--certificates", type=int, default=20, help="pending at the outage")
    parser.add_argument("--variants", default="frozen,refused,dns")
    parser.add_argument("--dns-seconds", type=float, default=60.0, help="DNS outage length")
    parser.add_argument("--db", default="bench_faults_ca")
    args = parser.parse_args()
    result = run(
        minutes=args.minutes,
        certificates=args.certificates,
        variants=tuple(v.strip() for v in args.variants.split(",") if v.strip()),
        dns_seconds=args.dns_seconds,
        db=args.db,
    )
    print()
    for key, value in result.items():
        print(f"{key:<42} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
