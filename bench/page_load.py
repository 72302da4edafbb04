"""Time the console's pages with 10 000 certificates on PostgreSQL (target: < 300 ms).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/web_bench .venv/bin/python bench/page_load.py

Creates the database if needed, migrates it, fills it with bulk_create (10 000 certificates
across 4 issuers with realistic status: most Ready, some in failure backoff, some issuing
with ACME requests/orders/challenges in flight, some pending approval; 5 events each), then
GETs each page 20 times with the Django test client (full stack: middleware, session, auth,
templates) and prints median and p95 per page, plus the number of SQL queries.

With `--http`, the same pages are fetched over real HTTP from `manage.py serve --no-worker`
(uvicorn) with the session cookie of a logged-in viewer.
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

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/web_bench")
os.environ.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
os.environ.setdefault("SECRET_KEY", "bench-only-secret")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

CERTIFICATES = int(os.environ.get("BENCH_CERTIFICATES", "10000"))
EVENTS_PER_CERT = 5
RUNS = 20
TARGET_MS = 300.0
BATCH = 2000


def fill() -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from issuance.models import (
        Certificate,
        CertificateRequest,
        Challenge,
        Event,
        Issuer,
        Order,
    )
    from issuance.pki.csr import build_csr
    from issuance.pki.keys import generate_private_key

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE issuance_event, issuance_challenge, issuance_order,"
            " issuance_certificaterequest, issuance_certificate, issuance_issuer CASCADE"
        )
    now = timezone.now()
    with transaction.atomic():
        issuers = [
            Issuer(name="letsencrypt", kind="acme", spec={"acme": {"server": "https://acme/dir"}}),
            Issuer(name="internal-ca", kind="ca", spec={"ca": {"secretName": "ca"}}),
            Issuer(name="selfsigned", kind="selfSigned", spec={"selfSigned": {}}),
            Issuer(name="kubelets", kind="ca", spec={"ca": {"secretName": "kube-ca"}}),
        ]
        Issuer.objects.bulk_create(issuers)
        certs = []
        for i in range(CERTIFICATES):
            issuer = issuers[i % len(issuers)]
            name = f"svc-{i:05d}.team-{i % 37}"
            dns = [f"{name}.example.com", f"www.{name}.example.com"]
            cert = Certificate(
                name=name,
                issuer=issuer,
                spec={
                    "secretName": f"{name}-tls",
                    "dnsNames": dns,
                    "issuerRef": {"name": issuer.name},
                },
                secret_name=f"{name}-tls",
                search_text=" ".join([name, *dns]),
                created_at=now - timedelta(days=90),
            )
            bucket = i % 100
            if bucket < 80:  # Ready, renewals spread over the next 60 days
                cert.state = "Ready"
                cert.not_before = now - timedelta(days=30)
                cert.not_after = now + timedelta(days=30 + i % 60)
                cert.renewal_time = cert.not_after - timedelta(days=30)
                cert.revision = 1 + i % 5
                cert.conditions = [{"type": "Ready", "status": "True", "reason": "Ready"}]
            elif bucket < 88:  # failure backoff
                attempts = 1 + i % 6
                cert.state = "Failed"
                cert.failed_issuance_attempts = attempts
                cert.last_failure_time = now - timedelta(minutes=i % 50)
                cert.next_retry_time = cert.last_failure_time + timedelta(hours=2 ** (attempts - 1))
                cert.conditions = [{"type": "Ready", "status": "False", "reason": "Failed"}]
            elif bucket < 96:  # issuing
                cert.state = "Issuing"
                cert.conditions = [{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]
            else:
                cert.state = "Pending"
            certs.append(cert)
        Certificate.objects.bulk_create(certs, batch_size=BATCH)

        # One real CSR for all requests: the approval queue decodes each one it shows.
        key = generate_private_key({"algorithm": "ECDSA", "size": 256})
        csr = build_csr(key, {"commonName": "node", "dnsNames": ["node.example.com"]})
        requests = []
        for i, cert in enumerate(certs):
            if cert.state in ("Issuing", "Failed") or i % 25 == 0:
                approval = "Pending" if (cert.state == "Issuing" and i % 4 == 0) else "Approved"
                requests.append(
                    CertificateRequest(
                        name=f"{cert.name}-1",
                        issuer=cert.issuer,
                        certificate=cert,
                        revision=1,
                        requester="system:certificate-controller",
                        source="certificate",
                        approval=approval,
                        spec={"request": csr},
                        created_at=now - timedelta(minutes=i % 600),
                    )
                )
        CertificateRequest.objects.bulk_create(requests, batch_size=BATCH)
        acme_requests = [
            r for r in requests if r.issuer.kind == "acme" and r.approval == "Approved"
        ]
        orders = [
            Order(
                name=f"{r.name}-order",
                request=r,
                issuer=r.issuer,
                spec={"dnsNames": []},
                state="pending",
                url=f"https://acme/order/{n}",
            )
            for n, r in enumerate(acme_requests)
        ]
        Order.objects.bulk_create(orders, batch_size=BATCH)
        challenges = []
        for n, order in enumerate(orders):
            for j in range(2):
                processing = n % 3 == 0 and j == 0
                challenges.append(
                    Challenge(
                        name=f"{order.name}-{j}",
                        order=order,
                        issuer=order.issuer,
                        dns_name=f"host-{n}-{j}.example.com",
                        type="http-01",
                        authorization_url=f"https://acme/authz/{n}/{j}",
                        token=f"tok-{n}-{j}",
                        spec={},
                        processing=processing,
                        presented=processing,
                        state="pending",
                        reason="self check failed: connection refused" if processing else "",
                        next_check_at=now + timedelta(seconds=10) if processing else None,
                        created_at=now - timedelta(minutes=n),
                    )
                )
        Challenge.objects.bulk_create(challenges, batch_size=BATCH)

        events = [
            Event(
                kind="Certificate",
                name=cert.name,
                certificate_name=cert.name,
                reason=("Issuing", "Generated", "Requested", "Issued", "Ready")[k],
                message="bench",
                created_at=now - timedelta(minutes=k),
            )
            for cert in certs
            for k in range(EVENTS_PER_CERT)
        ]
        Event.objects.bulk_create(events, batch_size=BATCH * 5)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(
        f"filled: {len(certs)} certificates, {len(requests)} requests, {len(orders)} orders,"
        f" {len(challenges)} challenges, {len(events)} events"
    )


def time_http(pages: dict[str, str], session_cookie: str) -> float:
    """GET each page over HTTP from uvicorn; returns the worst p95 in ms."""
    import socket
    import subprocess
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--no-worker", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/login/", timeout=2).read()
                break
            except OSError:
                time.sleep(0.2)

        def get(path: str) -> None:
            req = urllib.request.Request(base + path, headers={"Cookie": session_cookie})
            with urllib.request.urlopen(req, timeout=30) as response:
                assert response.status == 200, path
                response.read()

        return report(pages, get, lambda path: None)
    finally:
        proc.terminate()
        proc.wait(20)


def report(pages: dict[str, str], get: Any, count_queries: Any) -> float:
    print(f"{'page':34} {'median':>9} {'p95':>9} {'queries':>8}")
    worst = 0.0
    for label, path in pages.items():
        get(path)  # warm up (templates, connection)
        timings = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            get(path)
            timings.append((time.perf_counter() - t0) * 1000)
        queries = count_queries(path)
        timings.sort()
        median = statistics.median(timings)
        p95 = timings[int(0.95 * (len(timings) - 1) + 0.5)]
        worst = max(worst, p95)
        shown = "" if queries is None else str(queries)
        print(f"{label:34} {median:8.1f}ms {p95:8.1f}ms {shown:>8}")
    verdict = "OK" if worst < TARGET_MS else "SLOW"
    print(f"worst p95 {worst:.1f} ms (target < {TARGET_MS:.0f} ms): {verdict}")
    return worst


def main() -> None:
    url = os.environ["DATABASE_URL"]
    if not url.startswith("postgres"):
        sys.exit("this benchmark is for PostgreSQL (set DATABASE_URL=postgresql://…)")
    ensure_database(url)

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from issuance.models import Certificate

    call_command("migrate", verbosity=0)
    if Certificate.objects.count() != CERTIFICATES or "--refill" in sys.argv:
        fill()
    setup_test_environment()  # allowed hosts for the test client
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)

    sample = Certificate.objects.filter(state="Failed").order_by("name").first()
    assert sample is not None
    pages = {
        "dashboard": "/",
        "certificates (first page)": "/certificates/",
        "certificates (search)": "/certificates/?q=team-7.example",
        "certificates (state=Failed)": "/certificates/?state=Failed",
        "certificates (issuer, page 20)": "/certificates/?issuer=letsencrypt&page=20",
        "certificate detail": f"/certificates/{sample.name}/",
        "approval queue": "/requests/",
        "challenges (processing)": "/challenges/?status=processing",
    }

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, path

    def count_queries(path: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            client.get(path)
        return len(ctx.captured_queries)

    print(f"Django test client, {RUNS} runs per page:")
    report(pages, get, count_queries)
    if "--http" in sys.argv:
        cookie = (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )
        print(f"\nHTTP against uvicorn (manage.py serve --no-worker), {RUNS} runs per page:")
        time_http(pages, cookie)


if __name__ == "__main__":
    main()
