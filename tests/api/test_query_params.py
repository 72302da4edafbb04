"""Query parameters: anything an endpoint does not take, or a value it cannot use, is a 400
naming the parameter (issuance.api.query), never a 500 and never silently ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.api.query import MAX_LIMIT
from issuance.models import Order
from tests.factories import make_certificate, make_order


@pytest.fixture
def viewer(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["viewer"])


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 400, (response.status_code, response.content)
    body: dict[str, list[str]] = response.json()
    return body


TEXT_FILTERS = [
    ("/api/v1/certificates/", "search"),
    ("/api/v1/certificates/", "issuer"),
    ("/api/v1/certificaterequests/", "certificate"),
    ("/api/v1/certificaterequests/", "issuer"),
    ("/api/v1/orders/", "request"),
    ("/api/v1/orders/", "certificate"),
    ("/api/v1/challenges/", "order"),
    ("/api/v1/challenges/", "dnsName"),
    *[("/api/v1/events/", p) for p in ("kind", "name", "certificate", "type", "reason", "actor")],
]


@pytest.mark.parametrize(("url", "param"), TEXT_FILTERS)
@pytest.mark.parametrize("value", ["%00", "web%00x", "a%0Ab", "%7F"])
def test_control_characters_in_a_text_filter(
    world: dict[str, Any], viewer: APIClient, url: str, param: str, value: str
) -> None:
    """NUL used to reach PostgreSQL (DataError: text fields cannot contain NUL: a 500)."""
    errors = errors_of(viewer.get(f"{url}?{param}={value}"))
    assert errors == {param: ["must not contain control characters"]}


ENUM_FILTERS = [
    ("/api/v1/certificates/", "state", "Ready"),
    ("/api/v1/certificaterequests/", "approval", "Pending"),
    ("/api/v1/certificaterequests/", "state", "Issued"),
    ("/api/v1/orders/", "state", "valid"),
    ("/api/v1/challenges/", "state", "pending"),
    ("/api/v1/challenges/", "type", "http-01"),
    ("/api/v1/issuers/", "kind", "selfSigned"),
]


@pytest.mark.parametrize(("url", "param", "valid"), ENUM_FILTERS)
@pytest.mark.parametrize("value", ["", "AAA", "%00", "ready%20"])
def test_enum_filters_take_only_their_values(
    world: dict[str, Any], viewer: APIClient, url: str, param: str, valid: str, value: str
) -> None:
    errors = errors_of(viewer.get(f"{url}?{param}={value}"))
    assert list(errors) == [param]
    assert errors[param][0].startswith("must be one of: ") and valid in errors[param][0]
    assert viewer.get(f"{url}?{param}={valid}").status_code == 200


@pytest.mark.parametrize("value", ["", "yes", "1", "%00"])
def test_boolean_filter(world: dict[str, Any], viewer: APIClient, value: str) -> None:
    errors = errors_of(viewer.get(f"/api/v1/challenges/?processing={value}"))
    assert errors == {"processing": ["must be true or false"]}


def test_filters_filter(world: dict[str, Any], viewer: APIClient) -> None:
    order = make_order(world["ext"], "order-1", challenges=3, processing=1)
    Order.objects.filter(pk=order.pk).update(state="pending")
    make_certificate("other", world["ca"])

    def names(url: str) -> list[str]:
        response = viewer.get(url)
        assert response.status_code == 200, response.content
        return [item["name"] for item in response.json()["results"]]

    assert names("/api/v1/challenges/?processing=TRUE") == [f"{order.name}-0"]
    assert len(names("/api/v1/challenges/?processing=false&type=http-01")) == 2
    assert names("/api/v1/certificates/?issuer=ca&search=OTHER") == ["other"]
    assert names("/api/v1/certificates/?search=%20") == ["other", "web"]  # blank: no filter
    assert names("/api/v1/certificaterequests/?approval=Pending&issuer=ca") == ["ext-1"]
    assert names("/api/v1/orders/?request=ext-1&state=pending") == ["order-1"]
    assert names("/api/v1/issuers/?kind=ca") == ["ca"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/certificates/",
        "/api/v1/issuers/",
        "/api/v1/certificaterequests/",
        "/api/v1/orders/",
        "/api/v1/challenges/",
        "/api/v1/events/",
    ],
)
def test_unknown_parameter_on_a_list(world: dict[str, Any], viewer: APIClient, url: str) -> None:
    errors = errors_of(viewer.get(f"{url}?colour=blue&limit=5"))
    assert list(errors) == ["colour"]
    assert errors["colour"][0].startswith("unknown query parameter; this endpoint takes: ")
    assert {"limit", "offset"} <= set(errors["colour"][0].split(": ")[1].split(", "))
    assert viewer.get(f"{url}?format=json").status_code == 200  # DRF's own parameter


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/certificates/web/",
        "/api/v1/issuers/ss/",
        "/api/v1/certificaterequests/ext-1/",
        "/api/v1/scheduler/",
    ],
)
def test_detail_endpoints_take_no_filter(
    world: dict[str, Any], viewer: APIClient, url: str
) -> None:
    """A list's filters (and its paging) are unknown to a detail: not silently ignored."""
    errors = errors_of(viewer.get(f"{url}?state=Ready&limit=1"))
    assert errors == {
        "state": ["unknown query parameter; this endpoint takes none"],
        "limit": ["unknown query parameter; this endpoint takes none"],
    }


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("limit=0", "limit"),
        (f"limit={MAX_LIMIT + 1}", "limit"),
        ("limit=-1", "limit"),
        ("limit=1.5", "limit"),
        ("limit=null", "limit"),
        ("limit=", "limit"),
        ("limit=%EF%BC%95", "limit"),  # a fullwidth 5: int() would take it
        ("offset=-1", "offset"),
        ("offset=false", "offset"),
        ("offset=99999999999999999999", "offset"),  # past PostgreSQL's bigint
        ("offset=1&offset=2", "offset"),
        ("state=Ready&state=Failed", "state"),
    ],
)
def test_bad_paging_and_repeated_parameters(
    world: dict[str, Any], viewer: APIClient, query: str, param: str
) -> None:
    errors = errors_of(viewer.get(f"/api/v1/certificates/?{query}"))
    assert list(errors) == [param]


def test_paging_bounds(world: dict[str, Any], viewer: APIClient) -> None:
    page = viewer.get(f"/api/v1/certificates/?limit={MAX_LIMIT}&offset=0").json()
    assert [c["name"] for c in page["results"]] == ["web"]
    far = viewer.get("/api/v1/certificates/?offset=9223372036854775807")
    assert far.status_code == 200 and far.json()["results"] == []


def test_every_problem_at_once(world: dict[str, Any], viewer: APIClient) -> None:
    errors = errors_of(viewer.get("/api/v1/certificates/?state=x&search=%00&limit=0&x=1"))
    assert set(errors) == {"state", "search", "limit", "x"}


def test_authentication_and_method_come_first(
    world: dict[str, Any], viewer: APIClient, role_users: dict[str, User]
) -> None:
    assert APIClient().get("/api/v1/certificates/?x=%00").status_code == 401
    assert viewer.delete("/api/v1/certificates/web/?x=1").status_code == 403
    # No handler for the method: 405, whatever the query says.
    assert viewer.generic("TRACE", "/api/v1/certificates/?x=1").status_code == 405


def test_token_endpoint_checks_its_query(
    world: dict[str, Any], role_users: dict[str, User]
) -> None:
    errors = errors_of(
        APIClient().post("/api/v1/token/?next=/", {"username": "a", "password": "b"})
    )
    assert list(errors) == ["next"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/certificates/a%00b/",
        "/api/v1/certificates/Web/",
        "/api/v1/certificates/web%0A/",
        "/api/v1/issuers/-ss/",
        "/api/v1/orders/%C3%A9/",
        "/api/v1/challenges/x%00/",
        "/api/v1/certificaterequests/a%00/approve/",
        f"/api/v1/certificates/{'a' * 254}/",
    ],
)
def test_names_that_cannot_exist_are_404(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    url: str,
) -> None:
    """Answered without a query: PostgreSQL would refuse a NUL in the lookup (a 500)."""
    admin = api_client_for(role_users["admin"])
    response = admin.post(url, {}, format="json") if "approve" in url else admin.get(url)
    assert response.status_code == 404, response.content
    assert response.json()["detail"].endswith("matches the given query.")


def test_event_ids_that_cannot_exist_are_404(world: dict[str, Any], viewer: APIClient) -> None:
    for event_id in ("99999999999999999999999", "abc", "-1"):
        assert viewer.get(f"/api/v1/events/{event_id}/").status_code == 404


@pytest.mark.parametrize(
    "url", ["/api/v1/events/1.5/", "/api/v1/certificates/a/b/", "/api/v1/nothing/", "/api/v2/"]
)
def test_other_api_paths_are_a_json_404(world: dict[str, Any], viewer: APIClient, url: str) -> None:
    for response in (viewer.get(url), viewer.post(url, {}, format="json")):
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}
