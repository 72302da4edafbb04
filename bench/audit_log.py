"""Time the audit log (/audit/ and its CSV export) on PostgreSQL with many timeline entries.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/audit_bench .venv/bin/python bench/audit_log.py

Fills BENCH_EVENTS (default 300 000) events spread over 90 days, the way the worker writes
them (most by the worker, actor ""; a few per person; kinds and reasons skewed as in real
timelines), then GETs each page RUNS times with the Django test client and prints median,
p95 and SQL queries; the same again after dropping the audit indexes (event_actor,
event_reason), which are then made again. `--refill` refills.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pgdb import ensure_database  # noqa: E402

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/audit_bench")
os.environ.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
os.environ.setdefault("SECRET_KEY", "bench-only-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

EVENTS = int(os.environ.get("BENCH_EVENTS", "300000"))
RUNS = 15
BATCH = 10000
PEOPLE = ("alice", "bob", "carol", "dave")
# (kind, reason, share of events): a certificate's issuance writes most of them.
MIX = (
    ("Certificate", "Issuing", 20),
    ("Certificate", "Issued", 20),
    ("CertificateRequest", "Approved", 15),
    ("Order", "Valid", 15),
    ("Challenge", "Presented", 20),
    ("Certificate", "ManuallyTriggered", 4),
    ("CertificateRequest", "Denied", 1),
    ("Issuer", "SpecChanged", 1),
    ("Issuer", "ACMEAccountRegistered", 1),
    ("Challenge", "Failed", 3),
)


def fill() -> None:
    from django.db import connection
    from django.utils import timezone

    from issuance.models import Event

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE issuance_event")
    now = timezone.now()
    weights = [w for _, _, w in MIX]
    cycle = [i for i, w in enumerate(weights) for _ in range(w)]
    span = timedelta(days=90).total_seconds()
    batch: list[Event] = []
    for n in range(EVENTS):
        kind, reason, _ = MIX[cycle[(n * 37) % len(cycle)]]
        person = reason in ("ManuallyTriggered", "Denied", "SpecChanged") or n % 97 == 0
        cert = f"cert-{n % 5000:04d}"
        actor = PEOPLE[n % len(PEOPLE)] if person else ""
        if n % (EVENTS // 20) == EVENTS // 40:
            # erin did 20 things over the 90 days; Revoked is as rare.
            actor, kind, reason = "erin", "Certificate", "Revoked"
        batch.append(
            Event(
                kind=kind,
                name=cert if kind == "Certificate" else f"{cert}-{n % 7}",
                certificate_name="" if kind == "Issuer" else cert,
                reason=reason,
                actor=actor,
                message="bench",
                created_at=now - timedelta(seconds=span * n / EVENTS),
            )
        )
        if len(batch) == BATCH:
            Event.objects.bulk_create(batch)
            batch = []
    Event.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE issuance_event")
    print(f"filled: {EVENTS} events")


def report(client: Any, pages: dict[str, str]) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    print(f"{'page':44} {'median':>9} {'p95':>9} {'queries':>8}")
    for label, path in pages.items():
        client.get(path)
        timings = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            response = client.get(path)
            if response.streaming:
                b"".join(response.streaming_content)
            timings.append((time.perf_counter() - t0) * 1000)
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(path)
            if response.streaming:
                b"".join(response.streaming_content)
        timings.sort()
        p95 = timings[int(0.95 * (len(timings) - 1) + 0.5)]
        print(
            f"{label:44} {statistics.median(timings):8.1f}ms {p95:8.1f}ms"
            f" {len(ctx.captured_queries):>8}"
        )


def main() -> None:
    url = os.environ["DATABASE_URL"]
    if not url.startswith("postgres"):
        sys.exit("this benchmark is for PostgreSQL (set DATABASE_URL=postgresql://…)")
    ensure_database(url)

    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from issuance.models import Event

    call_command("migrate", verbosity=0)
    if Event.objects.count() != EVENTS or "--refill" in sys.argv:
        fill()
    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)

    first = client.get("/audit/").content.decode()
    older = first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    middle = Event.objects.order_by("-created_at", "-id")[EVENTS // 2]
    from console.web.audit import cursor_of

    day = middle.created_at - timedelta(days=1)

    pages = {
        "first page": "/audit/",
        "second page": older.replace("&amp;", "&"),
        f"page at entry {EVENTS // 2}": f"/audit/?before={cursor_of(middle)}",
        "actor=carol": "/audit/?actor=carol",
        "actor=carol, deep": f"/audit/?actor=carol&before={cursor_of(middle)}",
        "reason=Denied": "/audit/?reason=Denied",
        "reason=Denied, deep": f"/audit/?reason=Denied&before={cursor_of(middle)}",
        "actor=erin (20 entries)": "/audit/?actor=erin",
        "reason=Revoked (20 entries)": "/audit/?reason=Revoked",
        "kind=Issuer": "/audit/?kind=Issuer",
        "kind=Challenge&reason=Failed": "/audit/?kind=Challenge&reason=Failed",
        "one day (since/until)": f"/audit/?since={day:%Y-%m-%d}&until={day + timedelta(days=1):%Y-%m-%d}",
        "one day, actor=carol": f"/audit/?actor=carol&since={day:%Y-%m-%d}&until={day + timedelta(days=1):%Y-%m-%d}",
        "CSV actor=carol": "/audit/export.csv?actor=carol",
        "CSV reason=Denied": "/audit/export.csv?reason=Denied",
        "CSV actor=erin": "/audit/export.csv?actor=erin",
    }
    print(f"{EVENTS} events, Django test client, {RUNS} runs per page; with the indexes:")
    report(client, pages)
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX event_actor; DROP INDEX event_reason; ANALYZE issuance_event")
    try:
        print("\nwithout event_actor and event_reason:")
        report(client, pages)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE INDEX event_actor ON issuance_event (actor, created_at);"
                "CREATE INDEX event_reason ON issuance_event (reason, created_at);"
                "ANALYZE issuance_event"
            )


if __name__ == "__main__":
    main()
