"""Benchmark: 3,000 orders of an ACME issuer that has no account yet (issue 26, item 2).

    .venv/bin/python bench/issuer_wait.py [--orders 3000] [--others 300] [--window 60]
                                          [--runs 3] [--db bench_issuer_wait]

Starts pebble-challtestsrv and Pebble with External Account Binding required. Each run, on emptied
tables of its own PostgreSQL database: an ACME issuer whose EAB key is wrong (Pebble refuses the
registration, so the issuer has no account), `--orders` Orders of it due at once, and
`--others` Certificates of a self-signed issuer due at the same time (work that can be
done). One worker process (`manage.py reconcile`, default settings) runs with
ISSUANCE_RECONCILE_TRACE, and for `--window` seconds the bench measures, from the trace:

- items reconciled per minute (every controller);
- each order's look count (min / median / max, and how many were never looked at);
- the pass cycle: how long until every order had its first look, and how many second looks
  came before that (a repeat before every due row had its turn is unfair);
- how long the other certificates took to be Ready (fresh work beside the waiters);
- the worker's CPU seconds over the window and over its second half (the steady state),
  with the items reconciled in that second half.

Then the condition clears: the EAB Secret gets Pebble's key and the issuer is woken (what
an operator's fix and the issuer's recheck do). Measured from the fix: to the account
registered (the issuer's `ACMEAccountRegistered` entry, written just after the account is
stored) and to the first order moving (its `create_attempted_at`, stored before newOrder). Median and spread over
`--runs` runs are printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402

from tests.e2e.servers import (  # noqa: E402
    EAB_KEYS,
    free_port,
    manage_py,
    start_challtestsrv,
    start_pebble,
)

PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
WRONG_KEY = "c2VjcmV0LWJ1dC13cm9uZy1zZWNyZXQtYnV0LXdyb25nLXh4eA"
BATCH = 500


def fresh_database(name: str) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def fill(server: str, ca_bundle: str, orders: int, others: int) -> int:
    """The waiting issuer and its orders, the other certificates; returns the issuer's pk."""
    from django.utils import timezone

    from issuance.models import Certificate, CertificateRequest, Issuer, Order, Secret

    eab = Secret(name="eab-key", type="Opaque")
    eab.tls_key = json.dumps({"secret": WRONG_KEY})
    eab.save()
    now = timezone.now()
    issuer = Issuer.objects.create(
        name="waiting",
        kind="acme",
        spec={
            "acme": {
                "server": server,
                "email": "bench@example.test",
                "caBundle": ca_bundle,
                "solvers": [{"http01": {}}],
                "externalAccountBinding": {
                    "keyID": "kid-1",
                    "keySecretRef": {"name": "eab-key", "key": "secret"},
                },
            }
        },
        due_at=now,
    )
    requests = CertificateRequest.objects.bulk_create(
        (
            CertificateRequest(name=f"wait-{i:05d}", issuer=issuer, spec={"request": ""})
            for i in range(orders)
        ),
        batch_size=BATCH,
    )
    Order.objects.bulk_create(
        (
            Order(
                name=f"wait-{i:05d}",
                request=request,
                issuer=issuer,
                spec={"dnsNames": [f"wait-{i:05d}.example.test"]},
                due_at=now,
            )
            for i, request in enumerate(requests)
        ),
        batch_size=BATCH,
    )
    local = Issuer.objects.create(
        name="local", kind="selfSigned", spec={"selfSigned": {}}, due_at=now
    )
    certificates = []
    for i in range(others):
        name = f"other-{i:04d}"
        spec: dict[str, Any] = {
            "secretName": f"{name}-tls",
            "dnsNames": [f"{name}.example.test"],
            "issuerRef": {"name": "local", "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        }
        cert = Certificate(
            name=name, issuer=local, spec=spec, secret_name=f"{name}-tls", due_at=now
        )
        cert.refresh_search_text()
        certificates.append(cert)
    Certificate.objects.bulk_create(certificates, batch_size=BATCH)
    return int(issuer.pk)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_trace(path: Path) -> list[tuple[str, int, int]]:
    """(controller, pk, started ns) per reconcile."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        _pid, controller, pk, started, _ended = line.split()
        out.append((controller, int(pk), int(started)))
    return out


def fairness(
    trace: list[tuple[str, int, int]], order_ids: set[int], start_ns: int, end_ns: int
) -> dict[str, Any]:
    looks = {pk: 0 for pk in order_ids}
    first_round_done: float | None = None
    repeats_before = 0
    unseen = set(order_ids)
    items = 0
    for controller, pk, started in sorted(trace, key=lambda t: t[2]):
        if started < start_ns or started > end_ns:
            continue
        items += 1
        if controller != "orders" or pk not in looks:
            continue
        if looks[pk] and unseen:
            repeats_before += 1
        looks[pk] += 1
        unseen.discard(pk)
        if not unseen and first_round_done is None:
            first_round_done = (started - start_ns) / 1e9
    counts = sorted(looks.values())
    return {
        "items": items,
        "look_min": counts[0],
        "look_median": statistics.median(counts),
        "look_max": counts[-1],
        "never_looked": sum(1 for c in counts if c == 0),
        "cycle_s": first_round_done,
        "repeats_before_cycle": repeats_before,
    }


def one_run(args: argparse.Namespace, workdir: Path, pebble: Any, dns: Any) -> dict[str, Any]:
    from django.core.management import call_command
    from django.utils import timezone

    # Each run from empty tables (the database is made and migrated once, in main()).
    call_command("flush", interactive=False, verbosity=0)
    from issuance.models import Certificate, CertificateState, Event, Issuer, Order, Secret
    from issuance.worker.wakeup import wake

    issuer_pk = fill(pebble.directory_url, pebble.ca_bundle_b64, args.orders, args.others)
    order_ids = set(Order.objects.values_list("pk", flat=True))
    trace = workdir / f"trace-{time.time_ns()}.txt"
    env = {
        "DATABASE_URL": f"{PG}/{args.db}",
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "KEY_ENCRYPTION_KEY": os.environ["KEY_ENCRYPTION_KEY"],
        "SELF_CHECK_NAMESERVERS": dns.dns_address,
        "LOG_LEVEL": "WARNING",
        "ISSUANCE_RECONCILE_TRACE": str(trace),
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    worker = manage_py(workdir, ["reconcile"], env, name="worker")
    try:
        started = time.monotonic()
        cpu_start = cpu_seconds(worker.popen.pid)
        half_cpu: float | None = None
        others_ready: float | None = None
        while time.monotonic() - started < args.window:
            if others_ready is None:
                ready = Certificate.objects.filter(
                    issuer__name="local", state=CertificateState.READY
                ).count()
                if ready == args.others:
                    others_ready = time.monotonic() - started
            if half_cpu is None and time.monotonic() - started >= args.window / 2:
                half_cpu = cpu_seconds(worker.popen.pid)
            time.sleep(0.5)
        cpu_end = cpu_seconds(worker.popen.pid)
        lines = read_trace(trace)
        first = min((t[2] for t in lines), default=time.time_ns())
        result = fairness(lines, order_ids, first, first + int(args.window * 1e9))
        result["items_per_min"] = result["items"] * 60 / args.window
        # The second half of the window: the steady state once every order had its turn.
        result["items_2nd_half"] = fairness(
            lines, order_ids, first + int(args.window * 5e8), first + int(args.window * 1e9)
        )["items"]
        result["worker_cpu_s"] = cpu_end - cpu_start
        result["worker_cpu_2nd_half_s"] = cpu_end - (half_cpu or cpu_end)
        result["others_ready_s"] = others_ready

        # The condition clears: the right EAB key, and the issuer looks again.
        secret = Secret.objects.get(name="eab-key")
        secret.tls_key = json.dumps({"secret": EAB_KEYS["kid-1"]})
        secret.save()
        fixed_at = timezone.now()
        wake(Issuer.objects.get(pk=issuer_pk))
        deadline = time.monotonic() + 120
        moved: datetime | None = None
        registered: datetime | None = None
        while time.monotonic() < deadline and (moved is None or registered is None):
            registered = (
                Event.objects.filter(kind="Issuer", name="waiting", reason="ACMEAccountRegistered")
                .order_by("created_at")
                .values_list("created_at", flat=True)
                .first()
            )
            moved = (
                Order.objects.filter(create_attempted_at__isnull=False)
                .order_by("create_attempted_at")
                .values_list("create_attempted_at", flat=True)
                .first()
            )
            time.sleep(0.05)
        if registered is None or moved is None:
            raise RuntimeError(
                "no account or no order moving 120 s after the fix:\n" + worker.log()[-3000:]
            )
        # The timeline entry is written just after the account (and the wake-up of its
        # waiters) commits, so the first order may move before it: both from the fix.
        result["fix_to_registered_s"] = (registered - fixed_at) / timedelta(seconds=1)
        result["fix_to_first_order_s"] = (moved - fixed_at) / timedelta(seconds=1)
        return result
    finally:
        worker.stop()


def summary(runs: list[dict[str, Any]]) -> None:
    print("\nmedian [min – max] over", len(runs), "runs")
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        if not values:
            print(f"  {key:<30} never")
            continue
        missing = len(runs) - len(values)
        note = f" ({missing} run(s): never)" if missing else ""
        print(
            f"  {key:<30} {statistics.median(values):10.2f}"
            f"  [{min(values):.2f} – {max(values):.2f}]{note}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--others", type=int, default=300)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--db", default="bench_issuer_wait")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = f"{PG}/{args.db}"
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(40))
    os.environ.setdefault("KEY_ENCRYPTION_KEY", Fernet.generate_key().decode())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    fresh_database(args.db)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    workdir = Path(tempfile.mkdtemp(prefix="bench-issuer-wait-", dir=ROOT / "var"))
    print(f"logs in {workdir}")
    dns = start_challtestsrv(workdir)
    try:
        pebble = start_pebble(
            workdir, http_port=free_port(), dns_server=dns.dns_address, eab_required=True
        )
        try:
            runs = []
            for n in range(args.runs):
                result = one_run(args, workdir, pebble, dns)
                print(f"run {n + 1}: " + ", ".join(f"{k}={v}" for k, v in result.items()))
                runs.append(result)
            summary(runs)
        finally:
            pebble.stop()
    finally:
        dns.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
