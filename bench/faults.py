"""Benchmark: how the product rides out crashes and outages, with the default settings.

    .venv/bin/python bench/faults.py [--only worker,postgres,web,ca,redis] [--n 100]

Each scenario runs real processes (a private PostgreSQL server, Pebble, the web app, worker
processes) and prints what an operator would want to know: how long work stood still and
how many requests went where. Scenarios:

- worker:   N ACME certificates, two workers; one is SIGKILLed a quarter of the way in and
            restarted at once. Prints create → all Ready, and the longest time any object
            stayed leased by the dead worker.
- postgres: N ACME certificates; PostgreSQL stopped (fast shutdown) for 10 s mid-run, then
            started. Prints seconds from the database answering to all Ready, failed
            issuances, and CertificateRequests/Orders per certificate (1 and 1 if nothing
            was duplicated).
- web, ca, redis: bench/faults_web.py, bench/faults_ca.py and bench/faults_redis.py (each also
            runs alone); their own numbers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.pgserver import private_postgres  # noqa: E402
from tests.e2e.stack import Stack, issuance_stack  # noqa: E402

Numbers = dict[str, float | int | str]


def _orders(stack: Stack) -> int:
    return int(stack.query("SELECT count(*) FROM issuance_order")[0][0])


def _wait_for_orders(stack: Stack, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _orders(stack) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} orders after {timeout} s")
        time.sleep(0.05)


def _duplicates(stack: Stack) -> Numbers:
    certs = int(stack.query("SELECT count(*) FROM issuance_certificate")[0][0])
    requests = int(stack.query("SELECT count(*) FROM issuance_certificaterequest")[0][0])
    orders = _orders(stack)
    failed = int(
        stack.query(
            "SELECT count(*) FROM issuance_certificate WHERE last_failure_time IS NOT NULL"
        )[0][0]
    )
    return {
        "requests per certificate": round(requests / certs, 3),
        "orders per certificate": round(orders / certs, 3),
        "failed issuances": failed,
    }


def worker_kill(n: int) -> Numbers:
    workdir = Path(tempfile.mkdtemp(prefix="faults-worker-", dir=REPO / "var"))
    with private_postgres(workdir) as pg, issuance_stack(workdir, pg.url, workers=0) as stack:
        doomed = stack.start_worker("--worker-id", "doomed", name="doomed")
        stack.start_worker("--worker-id", "survivor", name="survivor")
        stack.create_acme_issuer()
        names = [f"k{i:04d}" for i in range(n)]
        t0 = time.monotonic()
        stack.create_certificates(names)
        _wait_for_orders(stack, n // 4)
        doomed.kill()
        killed = time.monotonic()
        stack.workers.remove(doomed)
        held: dict[tuple[str, Any], float] = {}
        for table in ("certificate", "certificaterequest", "order", "challenge"):
            for (pk,) in stack.query(
                f"SELECT id FROM issuance_{table} WHERE lease_owner = 'doomed'"
            ):
                held[(table, pk)] = 0.0
        stack.start_worker(name="restarted")  # as systemd's Restart=always would
        while any(v == 0.0 for v in held.values()):
            for key in [k for k, v in held.items() if v == 0.0]:
                owner = stack.query(
                    f"SELECT lease_owner FROM issuance_{key[0]} WHERE id = %s",
                    key[1],
                )
                if not owner or owner[0][0] != "doomed":
                    held[key] = time.monotonic() - killed
            if time.monotonic() - killed > 120:
                raise RuntimeError("the dead worker's rows were never taken over")
            time.sleep(0.1)
        ready = stack.wait_ready(names, timeout=600)
        return {
            "certificates": n,
            "rows leased by the killed worker": len(held),
            "longest wait on the dead worker (s)": round(max(held.values(), default=0.0), 1),
            "create -> all Ready with one SIGKILL (s)": round(max(ready.values()) - t0, 1),
            **_duplicates(stack),
        }


def postgres_outage(n: int, outage: float = 10.0) -> Numbers:
    workdir = Path(tempfile.mkdtemp(prefix="faults-pg-", dir=REPO / "var"))
    with private_postgres(workdir) as pg, issuance_stack(workdir, pg.url) as stack:
        stack.create_acme_issuer()
        names = [f"p{i:04d}" for i in range(n)]
        t0 = time.monotonic()
        stack.create_certificates(names)
        _wait_for_orders(stack, n // 4)
        pg.stop("fast")
        time.sleep(outage)
        pg.start()
        back = time.monotonic()
        ready = stack.wait_ready(names, timeout=600)
        log = stack.workers[0].log()
        return {
            "certificates": n,
            "outage (s)": outage,
            "database back -> all Ready (s)": round(max(ready.values()) - back, 1),
            "create -> all Ready (s)": round(max(ready.values()) - t0, 1),
            "worker log lines 'database unavailable'": log.count("database unavailable"),
            **_duplicates(stack),
        }


def _external(module: str) -> Callable[[int], Numbers]:
    def run(n: int) -> Numbers:
        mod = importlib.import_module(f"bench.{module}")
        result: Numbers = mod.run()
        return result

    return run


SCENARIOS: dict[str, Callable[[int], Numbers]] = {
    "worker": worker_kill,
    "postgres": postgres_outage,
    "web": _external("faults_web"),
    "ca": _external("faults_ca"),
    "redis": _external("faults_redis"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--n", type=int, default=100, help="certificates per scenario")
    args = parser.parse_args()
    (REPO / "var").mkdir(exist_ok=True)
    results: dict[str, Numbers] = {}
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        print(f"== {name}", flush=True)
        try:
            results[name] = SCENARIOS[name](args.n)
        except Exception as exc:  # one broken scenario must not hide the others' numbers
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        for key, value in results[name].items():
            print(f"  {key:<45} {value}", flush=True)
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
