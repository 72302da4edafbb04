"""Time the challenge scheduler pass with 100 000 queued challenges on PostgreSQL.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/chal_bench .venv/bin/python bench/scheduler_pass.py

Creates the database if needed, migrates it, fills it (bulk_create: many names, some
duplicate (dnsName, type) keys, several issuers, 60 processing), then times
- a pass at the cap (nothing to schedule),
- a pass with free slots (40 of 60 freed),
and prints EXPLAIN ANALYZE of the candidate query so the index use can be checked.
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

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/chal_bench")
os.environ.setdefault("KEY_ENCRYPTION_KEY", "bench-only-key")
os.environ.setdefault("SECRET_KEY", "bench-only-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

QUEUED = int(os.environ.get("BENCH_QUEUED", "100000"))
HISTORY = int(os.environ.get("BENCH_HISTORY", "50000"))
ISSUERS = 4
RUNS = 7


def main() -> None:
    url = os.environ["DATABASE_URL"]
    if not url.startswith("postgres"):
        sys.exit("this benchmark is for PostgreSQL (set DATABASE_URL=postgresql://…)")
    ensure_database(url)

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from issuance.controllers import scheduler
    from issuance.models import CertificateRequest, Challenge, Issuer, Order

    call_command("migrate", verbosity=0)
    Challenge.objects.all().delete()
    Order.objects.all().delete()
    CertificateRequest.objects.all().delete()
    Issuer.objects.filter(name__startswith="bench-").delete()

    cap = settings.MAX_CONCURRENT_CHALLENGES
    now = timezone.now()
    orders = []
    for i in range(ISSUERS):
        issuer = Issuer.objects.create(name=f"bench-{i}", kind="acme", spec={"acme": {}})
        request = CertificateRequest.objects.create(
            name=f"bench-{i}", issuer=issuer, spec={"request": ""}
        )
        orders.append(Order.objects.create(name=f"bench-{i}", request=request, issuer=issuer))

    # A fifth issuer with only a few (recent) queued challenges: its candidate query must use
    # the per-issuer index rather than walk the whole queue.
    small_issuer = Issuer.objects.create(name="bench-small", kind="acme", spec={"acme": {}})
    small_request = CertificateRequest.objects.create(
        name="bench-small", issuer=small_issuer, spec={"request": ""}
    )
    small = Order.objects.create(name="bench-small", request=small_request, issuer=small_issuer)
    rows = [
        Challenge(
            name=f"bench-small-{n}",
            order_id=small.pk,
            issuer_id=small_issuer.pk,
            dns_name=f"small{n}.example.org",
            type="http-01",
            authorization_url=f"https://ca.test/authz/small-{n}",
            token=f"small{n}",
            spec={"type": "http-01"},
            created_at=now - timedelta(seconds=n),
        )
        for n in range(20)
    ]
    # An issuer with a long history (finished challenges) and nothing queued: finding the
    # issuers with queued work must not walk its history.
    old_issuer = Issuer.objects.create(name="bench-history", kind="acme", spec={"acme": {}})
    old_request = CertificateRequest.objects.create(
        name="bench-history", issuer=old_issuer, spec={"request": ""}
    )
    history = Order.objects.create(name="bench-history", request=old_request, issuer=old_issuer)
    rows += [
        Challenge(
            name=f"bench-history-{n}",
            order_id=history.pk,
            issuer_id=old_issuer.pk,
            dns_name=f"old{n}.example.net",
            type="dns-01",
            authorization_url=f"https://ca.test/authz/history-{n}",
            token=f"history{n}",
            spec={"type": "dns-01"},
            created_at=now - timedelta(days=30, seconds=n),
            finished=True,
            state="valid",
        )
        for n in range(HISTORY)
    ]
    for n in range(QUEUED + cap):
        order = orders[n % ISSUERS]
        # Every 10th challenge repeats an earlier name: duplicate (dnsName, type) keys.
        host = f"h{n // 10 if n % 10 == 0 else n}"
        ctype = "dns-01" if n % 3 == 0 else "http-01"
        rows.append(
            Challenge(
                name=f"bench-{n}",
                order_id=order.pk,
                issuer_id=order.issuer_id,
                dns_name=f"{host}.example.test",
                type=ctype,
                authorization_url=f"https://ca.test/authz/{n}",
                token=f"tok{n}",
                spec={"type": ctype},
                created_at=now - timedelta(seconds=QUEUED + cap - n),
                processing=n < cap,
                scheduled_at=now if n < cap else None,
            )
        )
    t0 = time.perf_counter()
    Challenge.objects.bulk_create(rows, batch_size=5000)
    print(f"inserted {len(rows)} challenges in {time.perf_counter() - t0:.1f}s")
    with connection.cursor() as cursor:
        # As autovacuum would have: hint bits and the visibility map (index-only scans).
        cursor.execute("VACUUM ANALYZE issuance_challenge")

    def timed_pass() -> tuple[float, bool]:
        t = time.perf_counter()
        did = scheduler.schedule_pass()
        return (time.perf_counter() - t) * 1000, did

    at_cap = []
    for _ in range(RUNS):
        ms, did = timed_pass()
        assert not did, "nothing may be scheduled at the cap"
        at_cap.append(ms)
    print(f"pass at the cap ({cap} processing): median {statistics.median(at_cap):.2f} ms")

    with_free = []
    for _ in range(RUNS):
        running = list(Challenge.objects.filter(processing=True).values_list("pk", flat=True)[:40])
        Challenge.objects.filter(pk__in=running).update(
            processing=False, finished=True, state="valid"
        )
        ms, did = timed_pass()
        assert did
        with_free.append(ms)
        assert Challenge.objects.filter(processing=True).count() <= cap
    print(
        f"pass with 40 free slots: median {statistics.median(with_free):.2f} ms "
        f"(min {min(with_free):.2f}, max {max(with_free):.2f})"
    )
    print(f"queued now: {Challenge.objects.filter(finished=False, processing=False).count()}")

    from django.test.utils import CaptureQueriesContext

    running = list(Challenge.objects.filter(processing=True).values_list("pk", flat=True)[:40])
    Challenge.objects.filter(pk__in=running).update(processing=False, finished=True, state="valid")
    with CaptureQueriesContext(connection) as queries:
        scheduler.schedule_pass()
    print(f"\none pass with free slots: {len(queries.captured_queries)} queries")
    for q in queries.captured_queries:
        print(f"  {float(q['time']) * 1000:6.2f} ms  {q['sql'][:90]}")

    def explain(title: str, queryset: Any) -> str:
        plan = str(queryset.explain(analyze=True, buffers=True))
        print(f"\nEXPLAIN ANALYZE {title}:\n{plan}")
        return plan

    plans = explain("an issuer with queued work", scheduler.issuers_with_queued_work_query()[:1])
    for issuer_id in Issuer.objects.filter(name__startswith="bench-").values_list("pk", flat=True):
        plans += explain(
            f"issuer {issuer_id}'s candidates", scheduler.candidates_query(issuer_id, 40)
        )
    print()
    for index in (
        "chal_queued_issuer",
        "chal_queued_age",
        "chal_queued_key",
        "chal_processing_key",
    ):
        print(f"uses {index}: {index in plans}")
    assert "Seq Scan on issuance_challenge" not in plans, "a plan scans the whole table"
    assert "chal_queued_age" not in plans, "a plan walks the global queue"
    assert "issuance_challenge_issuer_id" not in plans, "a plan walks an issuer's history"


if __name__ == "__main__":
    main()
