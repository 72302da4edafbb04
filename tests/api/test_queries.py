"""List endpoints run a bounded number of queries, whatever the page size (no N+1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from issuance.controllers.acme import health
from issuance.models import CertificateRequest, Event
from tests.factories import csr_pem, make_certificate, make_order, make_selfsigned_issuer

LIST_URLS = [
    "/api/v1/issuers/",
    "/api/v1/certificates/",
    "/api/v1/certificaterequests/",
    "/api/v1/orders/",
    "/api/v1/challenges/",
    "/api/v1/events/",
]
# The user's roles, the count and the page: a handful, the same for 5 rows or 50.
MAX_QUERIES = 6


def _populate(start: int, stop: int) -> None:
    """One issuer, certificate, owned request, order, challenge and event per index."""
    pem = csr_pem()
    for i in range(start, stop):
        issuer = make_selfsigned_issuer(f"iss-{i}")
        cert = make_certificate(f"cert-{i}", issuer)
        request = CertificateRequest.objects.create(
            name=f"cr-{i}",
            issuer=issuer,
            certificate=cert,
            revision=1,
            spec={"request": pem, "issuerRef": {"name": issuer.name}},
        )
        make_order(request, f"order-{i}", challenges=1)
        Event.objects.create(kind="Certificate", name=cert.name, reason="Test")


def _measure(client: APIClient, url: str) -> tuple[list[str], int]:
    # Both measures start from the same state of the process's short-lived caches (the ACME
    # outages are read at most once a second): a loaded machine once made only one of them
    # read it, which is not growth with the page size.
    health.forget()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url + "?limit=100")
    assert response.status_code == 200
    return [q["sql"] for q in ctx.captured_queries], len(response.json()["results"])


@pytest.mark.parametrize("url", LIST_URLS)
def test_list_queries_do_not_grow_with_page_size(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    django_assert_max_num_queries: DjangoAssertNumQueries,
    url: str,
) -> None:
    client = api_client_for(role_users["viewer"])
    client.get(url)  # the user's roles are looked up once and cached on the user
    _populate(0, 5)
    small_queries, small_rows = _measure(client, url)
    _populate(5, 50)
    large_queries, large_rows = _measure(client, url)
    assert large_rows >= small_rows + 45
    assert len(large_queries) == len(small_queries), (url, small_queries, large_queries)
    with django_assert_max_num_queries(MAX_QUERIES):
        assert client.get(url + "?limit=100").status_code == 200
