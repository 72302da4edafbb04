"""Output escaping (XSS) and bounded query counts on the list pages."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from issuance.acme import health
from issuance.models import CertificateRequest, Event, Issuer
from tests.factories import csr_pem, make_certificate, make_endpoint
from tests.web.builders import acme_chain, backoff_certificate, ready_certificate

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_hostile_strings_are_escaped_everywhere(client_for: ClientFor, issuer: Issuer) -> None:
    # Names are validated, so hostile text arrives through the free-form fields.
    cert = make_certificate("shop", issuer, commonName=SCRIPT, dnsNames=[f"{SCRIPT}.test"])
    cert.set_condition("Ready", "False", "Failed", SCRIPT)
    cert.renew_requested_by = SCRIPT
    cert.renew_requested_at = timezone.now()
    cert.save()
    _, order, challenge = acme_chain(cert, issuer)
    type(challenge).objects.filter(pk=challenge.pk).update(reason=SCRIPT)
    type(order).objects.filter(pk=order.pk).update(reason=SCRIPT)
    Event.objects.create(
        kind="Certificate",
        name="shop",
        certificate_name="shop",
        reason="Failed",
        message=SCRIPT,
        actor=SCRIPT,
    )
    CertificateRequest.objects.create(
        name="evil-csr",
        issuer=issuer,
        requester=SCRIPT,
        spec={"request": csr_pem("evil.example.test", common_name=SCRIPT)},
    )
    client = client_for("approver")
    pages = [
        "/",
        "/certificates/",
        "/certificates/?q=" + SCRIPT,
        "/certificates/shop/",
        "/requests/",
        "/orders/",
        "/challenges/",
        "/partials/certificates/shop/timeline/",
        "/partials/dashboard/challenges/",
        "/partials/dashboard/deployments/",
    ]
    for url in pages:
        html = client.get(url).content.decode()
        assert SCRIPT not in html, url
    detail = client.get("/certificates/shop/").content.decode()
    assert detail.count(ESCAPED) >= 4  # CN, condition message, timeline message, actor, …
    queue = client.get("/requests/").content.decode()
    assert ESCAPED in queue  # requester
    assert "CN=" in queue
    assert "&lt;script&gt;" in queue  # the CSR's subject, decoded then escaped
    challenges = client.get("/challenges/").content.decode()
    assert ESCAPED in challenges


def _many_certificates(issuer: Issuer, n: int, prefix: str) -> None:
    now = timezone.now()
    other = Issuer.objects.create(name=f"other-{n}", kind="selfSigned", spec={"selfSigned": {}})
    for i in range(n):
        if i % 3 == 0:
            backoff_certificate(f"{prefix}cert-{i:04d}", issuer)
        elif i % 3 == 1:
            ready_certificate(f"{prefix}cert-{i:04d}", issuer, days_left=20 + i % 40)
        else:
            make_certificate(f"{prefix}cert-{i:04d}", other)
        if i % 10 == 0:
            cert = make_certificate(f"{prefix}acme-{i:04d}", issuer)
            acme_chain(cert, issuer)
            # Endpoints in every state: the Deployments card and the deployed filter.
            for state in ("Deployed", "Stale", "Mismatch", "Unreachable"):
                make_endpoint(cert, f"{state.lower()}.example.test", state, now=now)
            Event.objects.create(
                kind="Certificate",
                name=cert.name,
                certificate_name=cert.name,
                reason="Issuing",
                created_at=now - timedelta(minutes=i),
            )
    for i in range(n // 5):
        CertificateRequest.objects.create(
            name=f"{prefix}ext-{i:04d}",
            issuer=issuer,
            requester="system:node:n",
            spec={"request": csr_pem(f"n{i}.example.test", common_name=f"node-{i}")},
        )


PAGES = [
    "/",
    "/certificates/",
    "/certificates/?q=cert-00&state=Failed",
    "/certificates/?issuer=selfsigned&page=2",
    "/certificates/?deployed=stale",
    "/certificates/?deployed=deployed",
    "/certificates/?deployed=none",
    "/requests/",
    "/issuers/",
    "/orders/",
    "/challenges/",
    "/challenges/?status=processing",
    "/partials/dashboard/challenges/",
    "/partials/dashboard/deployments/",
    "/partials/certificates/",
]


def _query_counts(
    client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> dict[str, int]:
    counts = {}
    for url in PAGES:
        # Every page starts cold: the CA-outage view is cached for a second per process, so a
        # page shown within a second of another would otherwise count one query fewer.
        health.forget()
        with django_assert_max_num_queries(30) as ctx:
            assert client.get(url).status_code == 200, url
        counts[url] = len(ctx.captured_queries)
    return counts


def test_query_counts_do_not_grow_with_rows(
    client_for: ClientFor, issuer: Issuer, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    client = client_for("viewer")
    _many_certificates(issuer, 10, "a")
    small = _query_counts(client, django_assert_max_num_queries)
    _many_certificates(Issuer.objects.create(name="second", kind="selfSigned", spec={}), 100, "b")
    large = _query_counts(client, django_assert_max_num_queries)
    assert small == large


def test_certificate_detail_query_count_is_bounded(
    client_for: ClientFor, issuer: Issuer, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    client = client_for("viewer")
    cert = backoff_certificate("shop", issuer)
    acme_chain(cert, issuer)
    with django_assert_max_num_queries(30) as small:
        client.get("/certificates/shop/")
    for revision in range(2, 12):
        CertificateRequest.objects.create(
            name=f"shop-{revision}",
            issuer=issuer,
            certificate=cert,
            revision=revision,
            spec={"request": "x"},
        )
    for i in range(50):
        Event.objects.create(
            kind="Certificate", name="shop", certificate_name="shop", reason=f"E{i}"
        )
    with django_assert_max_num_queries(30) as large:
        client.get("/certificates/shop/")
    # 10 more requests and 50 more events, no more queries (fewer: the newest requests have
    # no orders, so there are no challenges to prefetch).
    assert len(large.captured_queries) <= len(small.captured_queries)
    html = client.get("/certificates/shop/").content.decode()
    assert "shop-11" in html
    assert "E49" in html
