"""Benchmark: the web process during a PostgreSQL outage, and how fast it recovers.

    .venv/bin/python bench/faults_web.py [--mode fast|kill|both] [--outage 10] [--clients 8]

Starts a private PostgreSQL server (tests/e2e/pgserver.py), migrates it and runs
`manage.py serve` (web and worker in one process, default settings) on it. Then:

1. `--clients` clients send requests back to back: the certificate list (GET), a
   certificate create (POST), a console page (logged-in session) and an HTTP-01 token that
   was presented and fetched once before (as the worker's self-check does);
2. PostgreSQL is stopped for `--outage` seconds (`fast`: a fast shutdown, as
   `pg_ctlcluster stop` does; `kill`: SIGKILL to every PostgreSQL process), the clients
   still sending;
3. PostgreSQL is started again; once it accepts connections, the certificate list is
   asked for until it answers 2xx.

Prints, per stop mode: the requests sent during the outage and their status codes (per
kind of request), the slowest answer, how many took 2 s or more, and the seconds from
PostgreSQL answering again to the first 2xx. `run()` returns the same as a dict (for
bench/faults.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.webstack import (  # noqa: E402
    Answer,
    ServeStack,
    certificate_body,
    serve_on_private_postgres,
)

TOKEN = "bench-outage-token"
KEY = f"{TOKEN}.thumbprint"
LIST = "/api/v1/certificates/"
LIMIT = 2.0  # seconds: the bound every answer during an outage must meet

Result = dict[str, float | int | str]


class Clients:
    """Threads sending one kind of request after another until stopped; every answer
    (or connection error) is recorded with the time it was sent."""

    def __init__(self, stack: ServeStack, count: int) -> None:
        self.stack = stack
        self.count = count
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.records: list[tuple[float, str, str, float]] = []  # sent, kind, status, seconds
        self._names = iter(range(1, 10**9))
        self._pool = ThreadPoolExecutor(count)

    def _send(self, kind: str) -> Answer:
        stack = self.stack
        if kind == "GET list":
            return stack.call("GET", LIST)
        if kind == "POST create":
            with self.lock:
                name = f"bench-{next(self._names)}"
            return stack.call("POST", LIST, certificate_body(name))
        if kind == "page":
            return stack.call("GET", "/", session=True)
        return stack.fetch_token(TOKEN)

    def _loop(self, client: int) -> None:
        kinds = ["GET list", "POST create", "page", "HTTP-01"]
        turn = client
        while not self.stop.is_set():
            kind = kinds[turn % len(kinds)]
            turn += 1
            sent = time.monotonic()
            try:
                status = str(self._send(kind).status)
            except OSError as exc:  # refused, reset, timed out: recorded as such
                status = type(exc).__name__
            with self.lock:
                self.records.append((sent, kind, status, time.monotonic() - sent))

    def start(self) -> None:
        for client in range(self.count):
            self._pool.submit(self._loop, client)

    def finish(self) -> None:
        self.stop.set()
        self._pool.shutdown(wait=True)


def _first_2xx(stack: ServeStack, timeout: float = 120) -> float:
    """Seconds until the certificate list answers 2xx (polled every 10 ms)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if 200 <= stack.call("GET", LIST, timeout=10).status < 300:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.01)
    raise TimeoutError(f"no 2xx {timeout} s after PostgreSQL came back")


def _summary(records: list[tuple[float, str, str, float]]) -> Result:
    statuses = Counter(status for _, _, status, _ in records)
    by_kind: dict[str, Counter[str]] = {}
    for _, kind, status, _ in records:
        by_kind.setdefault(kind, Counter())[status] += 1
    slowest = max((seconds for *_, seconds in records), default=0.0)
    return {
        "requests": len(records),
        "statuses": ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())),
        "by_kind": "; ".join(
            f"{kind} " + ", ".join(f"{s}: {n}" for s, n in sorted(counts.items()))
            for kind, counts in sorted(by_kind.items())
        ),
        "status_503": statuses.get("503", 0),
        "status_2xx": sum(n for s, n in statuses.items() if s.startswith("2")),
        "status_500": statuses.get("500", 0),
        "slowest_s": round(slowest, 3),
        "at_or_over_2s": sum(1 for *_, seconds in records if seconds >= LIMIT),
    }


def run(mode: str = "fast", outage: float = 10.0, clients: int = 8) -> Result:
    """One outage of `outage` seconds under `clients` busy clients; the numbers."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-faults-web-{mode}-", dir=REPO / "var"))
    with serve_on_private_postgres(workdir) as stack:
        stack.present_http01({TOKEN: KEY})
        warm = stack.fetch_token(TOKEN)  # as the self-check does before the CA is asked
        if warm.body.decode() != KEY:
            raise RuntimeError(f"the token is not answered before the outage: {warm}")
        load = Clients(stack, clients)
        load.start()
        time.sleep(1.0)  # steady load before the outage
        try:
            went_down = time.monotonic()
            stack.pg.stop() if mode == "fast" else stack.pg.kill()
            time.sleep(max(0.0, outage - (time.monotonic() - went_down)))
        finally:
            came_back = time.monotonic()
            stack.pg.start()  # returns once PostgreSQL accepts connections
            answering = time.monotonic()
        recovery = _first_2xx(stack)
        load.finish()
        during = [r for r in load.records if went_down <= r[0] < came_back]
        result: Result = {"mode": mode, "outage_s": round(came_back - went_down, 1)}
        result.update(_summary(during))
        result["pg_start_s"] = round(answering - came_back, 3)
        result["recovery_s"] = round(recovery, 3)
        result["serve_alive"] = "yes" if stack.serve.alive() else "no"
        result["logs"] = str(workdir)
        return result


def report(result: Result) -> str:
    return "\n".join(
        [
            f"stop mode {result['mode']}: PostgreSQL down {result['outage_s']} s",
            f"  requests sent during the outage: {result['requests']}",
            f"  status codes: {result['statuses']}",
            f"  per kind: {result['by_kind']}",
            f"  slowest answer: {result['slowest_s']} s"
            f" ({result['at_or_over_2s']} took {LIMIT:g} s or more)",
            f"  PostgreSQL start to accepting connections: {result['pg_start_s']} s",
            f"  from PostgreSQL answering again to the first 2xx: {result['recovery_s']} s",
            f"  same serve process still running: {result['serve_alive']}",
            f"  logs: {result['logs']}",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["fast", "kill", "both"], default="both")
    parser.add_argument("--outage", type=float, default=10.0, help="seconds")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    modes = ["fast", "kill"] if args.mode == "both" else [args.mode]
    for mode in modes:
        print(report(run(mode, args.outage, args.clients)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
