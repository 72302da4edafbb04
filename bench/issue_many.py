"""Benchmark: issue N single-name certificates from Pebble through the whole stack.

    .venv/bin/python bench/issue_many.py 1000 [--key default|rsa2048|ecdsa256] [--db bench_issue]
                                              [--workers 2] [--threads 4]

Starts pebble-challtestsrv and Pebble, the web app (uvicorn: REST API and HTTP-01 answers,
on Pebble's HTTP-01 port) and worker(s) (`manage.py reconcile`, --workers) on a fresh PostgreSQL
database. Creates an ACME issuer and then the certificates through the REST API (token
auth, 8 concurrent clients), waits until all are Ready, verifies every chain against
Pebble's root, and prints: wall time, certificates/s, CPU per certificate of the workers,
the web app, PostgreSQL, Pebble and the whole machine, peak RSS of the worker(s) and the web
app (from /proc), and the latency of a single certificate (create → Ready).

Two worker processes by default: one Python process runs on one core at a time (GIL), and
several workers on one database is a supported deployment ("several workers on several
hosts may run at once"); `--workers 1 --threads 8` is the single-process figure.

`--key` picks the certificates' private keys: `default` (the default: no `privateKey` in the
spec, so what a user gets, RSA 2048 as in cert-manager), `rsa2048` (the same, spelled out)
or `ecdsa256` (ECDSA P-256). Generating an RSA 2048 key costs ~35 ms of worker CPU on
average (8-110 ms: a search for primes), an ECDSA one well under 1 ms; that is most of the
difference per certificate between the two (stored keys are loaded without repeating
OpenSSL's RSA check, each at most once a pass).

Pebble's nonce rejection stays at its default (5 %), so badNonce retries are included.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402

from tests.e2e.servers import (  # noqa: E402
    Process,
    free_port,
    manage_py,
    start_challtestsrv,
    start_pebble,
    start_process,
    start_uvicorn,
    verify_chain,
)
from tests.e2e.stack import Api, cert_body, prepare_database  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432"
# What each --key means in the Certificates' spec (cert_body's `key`).
KEYS = {
    "default": "default (no privateKey in the spec: RSA 2048)",
    "rsa2048": "RSA 2048 (privateKey.algorithm RSA, size 2048)",
    "ecdsa256": "ECDSA P-256 (privateKey.algorithm ECDSA, size 256)",
}
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def machine_busy_seconds() -> float:
    """CPU seconds spent by everything on the machine (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / TICKS


class PostgresCpu:
    """CPU seconds of PostgreSQL server processes, sampled: a backend that exits (a web
    request's connection, CONN_MAX_AGE=0) keeps the last value seen, so at most one sampling
    interval of its CPU is missed."""

    def __init__(self) -> None:
        self.start = self._read()
        self.seen = dict(self.start)

    @staticmethod
    def _read() -> dict[int, float]:
        found = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if "(postgres)" in stat.read_text():
                    found[int(stat.parent.name)] = cpu_seconds(int(stat.parent.name))
            except (OSError, ValueError):
                continue
        return found

    def sample(self) -> None:
        self.seen.update(self._read())

    def total(self) -> float:
        self.sample()
        return sum(v - self.start.get(pid, 0.0) for pid, v in self.seen.items())


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trace_summary(path: Path, since_ns: int, n: int) -> str:
    """Reconciles per certificate by controller, from the trace lines of the N-phase
    (`pid controller pk started_ns ended_ns`, one per reconcile), and their mean duration."""
    passes: dict[str, int] = {}
    spent: dict[str, int] = {}
    for line in path.read_text().splitlines():
        _pid, controller, _pk, started, ended = line.split()
        if int(started) < since_ns:
            continue  # the issuer and the single-certificate runs
        passes[controller] = passes.get(controller, 0) + 1
        spent[controller] = spent.get(controller, 0) + int(ended) - int(started)
    rows = [
        f"  {name:<22} {count / n:5.2f} per cert, {spent[name] / count / 1e6:6.1f} ms wall each"
        for name, count in sorted(passes.items())
    ]
    total = sum(passes.values())
    return "\n".join(["reconciles (trace)", *rows, f"  {'all':<22} {total / n:5.2f} per cert"])


def fresh_database(name: str) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def run(args: argparse.Namespace) -> int:
    n: int = args.n
    workdir = Path(tempfile.mkdtemp(prefix="bench-issue-", dir=REPO / "var"))
    print(f"logs in {workdir}")
    print(f"certificate keys: {KEYS[args.key]}")
    fresh_database(args.db)
    dns = start_challtestsrv(workdir)
    http_port = free_port()
    pebble = start_pebble(workdir, http_port=http_port, dns_server=dns.dns_address)
    env = {
        "DATABASE_URL": f"{PG}/{args.db}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SELF_CHECK_NAMESERVERS": dns.dns_address,
        "HTTP01_SELF_CHECK_PORT": str(http_port),
        "MAX_CONCURRENT_CHALLENGES": str(args.cap),
        "WORKER_THREADS": str(args.threads),
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    if args.trace:
        env["ISSUANCE_RECONCILE_TRACE"] = args.trace
        Path(args.trace).unlink(missing_ok=True)
    procs: list[Process] = []
    try:
        token = prepare_database(workdir, env)
        web = start_uvicorn(workdir, http_port, env)
        procs.append(web)
        workers: list[Process] = []
        for index in range(args.workers):
            name = f"worker-{index}" if index else "worker"
            if args.profile:
                profile = f"{args.profile}.{index}" if index else args.profile
                workers.append(
                    start_process(
                        name,
                        [sys.executable, "bench/profiled_worker.py", profile],
                        workdir,
                        env=env,
                    )
                )
            else:
                workers.append(manage_py(workdir, ["reconcile"], env, name=name))
        procs.extend(workers)
        api = Api(f"http://127.0.0.1:{http_port}", token)

        api.call(
            "POST",
            "/api/v1/issuers/",
            {
                "name": "pebble",
                "spec": {
                    "acme": {
                        "server": pebble.directory_url,
                        "email": "bench@example.test",
                        "caBundle": pebble.ca_bundle_b64,
                        "solvers": [{"http01": {}}],
                    }
                },
            },
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            issuer = api.call("GET", "/api/v1/issuers/pebble/")
            conds = issuer.get("status", issuer).get("conditions") or issuer.get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"issuer not ready: {issuer}")

        # Single-certificate latency (create → Ready), a few times; the first warms up.
        latencies = []
        for i in range(args.single):
            name = f"single-{i}"
            t0 = time.monotonic()
            api.call("POST", "/api/v1/certificates/", cert_body(name, key=args.key))
            while not api.is_ready(name):
                if time.monotonic() - t0 > 60:
                    raise RuntimeError(f"{name} not ready after 60 s")
                time.sleep(0.02)
            latencies.append(time.monotonic() - t0)
        base_ready = api.ready_count()

        cpu0 = sum(cpu_seconds(w.popen.pid) for w in workers)
        web_cpu0 = cpu_seconds(web.popen.pid)
        busy0 = machine_busy_seconds()
        pg = PostgresCpu()
        self0 = sum(os.times()[:2])
        ca_cpu0 = cpu_seconds(pebble.process.popen.pid) + cpu_seconds(dns.process.popen.pid)
        t0 = time.monotonic()
        t0_ns = time.time_ns()
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: api.call(
                        "POST", "/api/v1/certificates/", cert_body(f"b{i}", key=args.key)
                    ),
                    range(n),
                )
            )
        created = time.monotonic() - t0
        ready = 0
        last_print = 0.0
        while ready < n:
            time.sleep(0.5)
            pg.sample()
            ready = api.ready_count() - base_ready
            now = time.monotonic()
            if now - last_print > 5:
                print(f"  {now - t0:6.1f}s ready {ready}/{n}", flush=True)
                last_print = now
            if now - t0 > args.timeout:
                raise RuntimeError(f"only {ready}/{n} ready after {args.timeout}s")
            for worker in workers:
                if not worker.alive():
                    raise RuntimeError("worker died:\n" + worker.log()[-3000:])
        wall = time.monotonic() - t0
        worker_cpu = sum(cpu_seconds(w.popen.pid) for w in workers) - cpu0
        web_cpu = cpu_seconds(web.popen.pid) - web_cpu0
        busy = machine_busy_seconds() - busy0
        pg_cpu = pg.total()
        self_cpu = sum(os.times()[:2]) - self0
        ca_cpu = (
            cpu_seconds(pebble.process.popen.pid) + cpu_seconds(dns.process.popen.pid) - ca_cpu0
        )

        roots = pebble.roots()
        with psycopg.connect(f"{PG}/{args.db}") as conn:
            rows = conn.execute(
                "SELECT s.tls_crt FROM issuance_secret s JOIN issuance_certificate c "
                "ON c.secret_name = s.name WHERE c.name LIKE 'b%%'"
            ).fetchall()
        assert len(rows) == n, f"{len(rows)} secrets for {n} certificates"
        for (chain,) in rows:
            verify_chain(chain, roots)

        print(f"\nN={n} workers={args.workers} x {args.threads} threads, challenge cap={args.cap}")
        print(f"certificate keys       {KEYS[args.key]}")
        print(f"created via API in     {created:.1f} s")
        print(f"all Ready after        {wall:.1f} s")
        print(f"throughput             {n / wall:.1f} certificates/s")
        print(f"worker CPU             {worker_cpu:.1f} s = {1000 * worker_cpu / n:.1f} ms/cert")
        print(f"web CPU (API+HTTP-01)  {web_cpu:.1f} s = {1000 * web_cpu / n:.1f} ms/cert")
        print(f"PostgreSQL CPU         {pg_cpu:.1f} s = {1000 * pg_cpu / n:.1f} ms/cert")
        print(f"Pebble + DNS CPU       {ca_cpu:.1f} s = {1000 * ca_cpu / n:.1f} ms/cert")
        print(f"bench client CPU       {self_cpu:.1f} s = {1000 * self_cpu / n:.1f} ms/cert")
        print(
            f"machine CPU (all)      {busy:.1f} s = {1000 * busy / n:.1f} ms/cert"
            f" ({busy / wall:.2f} of {os.cpu_count()} cores busy)"
        )
        rss = ", ".join(f"{peak_rss_mb(w.popen.pid):.0f}" for w in workers)
        print(f"worker peak RSS        {rss} MB")
        print(f"web peak RSS           {peak_rss_mb(web.popen.pid):.0f} MB")
        print(
            "single-cert latency    "
            + ", ".join(f"{x * 1000:.0f} ms" for x in latencies)
            + " (first one warms up)"
        )
        print(f"verified {len(rows)} chains against Pebble's root")
        if args.trace:
            print(trace_summary(Path(args.trace), t0_ns, n))
        return 0
    finally:
        for proc in reversed(procs):
            proc.stop()
        pebble.stop()
        dns.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=100)
    parser.add_argument(
        "--key", choices=tuple(KEYS), default="default", help="certificate keys (%(default)s)"
    )
    parser.add_argument("--db", default="bench_issue")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--cap", type=int, default=60, help="MAX_CONCURRENT_CHALLENGES")
    parser.add_argument("--single", type=int, default=3, help="single-certificate runs")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--profile", default="", help="write a cProfile of the worker here")
    parser.add_argument("--trace", default="", help="ISSUANCE_RECONCILE_TRACE file (per item)")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
