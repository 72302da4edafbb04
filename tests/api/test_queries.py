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

from issuance.acme import health
from issuance.models import (
    CertificateRequest,
    Cluster,
    Event,
    PasswordChangeRequired,
    RoleScope,
    TOTPFactor,
)
from tests.factories import (
    csr_pem,
    make_certificate,
    make_order,
    make_selfsigned_issuer,
    role_group,
)

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


def _populate_users(start: int, stop: int) -> None:
    """Users with everything the users list shows: a role, a cluster scope, a second factor,
    a password to change."""
    cluster, _ = Cluster.objects.get_or_create(
        name="prod", defaults={"created_by": "admin", "kubeconfig_ciphertext": "x"}
    )
    for i in range(start, stop):
        user = User.objects.create_user(f"user-{i:03}")
        user.groups.add(role_group("viewer"))
        RoleScope.objects.create(user=user, cluster=cluster, namespace=f"team-{i}")
        TOTPFactor.objects.create(user=user, name="app", confirmed=True)
        PasswordChangeRequired.objects.create(user=user, set_by="admin")


def test_users_list_queries_do_not_grow_with_page_size(
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    """secondFactor and mustChangePassword come with the list's own query (annotations)."""
    client = api_client_for(role_users["admin"])
    client.get("/api/v1/users/")
    _populate_users(0, 5)
    small_queries, small_rows = _measure(client, "/api/v1/users/")
    _populate_users(5, 50)
    large_queries, large_rows = _measure(client, "/api/v1/users/")
    assert large_rows >= small_rows + 45
    assert len(large_queries) == len(small_queries), (small_queries, large_queries)
    with django_assert_max_num_queries(MAX_QUERIES):
        listing = client.get("/api/v1/users/?limit=100").json()["results"]
    made = [u for u in listing if u["username"].startswith("user-")]
    assert len(made) == 50
    assert all(u["secondFactor"] == "totp" and u["mustChangePassword"] for u in made)
