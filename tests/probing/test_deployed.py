"""What the endpoints serve, summed up over all certificates: the database filters agree with
the one-word state of each certificate, the dashboard's Deployments card, the certificates
list's and the API's `deployed` filter, and the deployment gauges of /metrics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from issuance.models import (
    Certificate,
    Endpoint,
    Issuer,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import deliver
from issuance.probing import runner
from issuance.probing.deployment import (
    FILTER_VALUES,
    STATES,
    certificate_counts,
    certificate_q,
    deployment,
    endpoint_counts,
    endpoint_q,
    state_of,
)
from tests.factories import make_certificate, make_endpoint, make_selfsigned_issuer
from tests.notifications.receivers import http_receiver
from tests.probing.conftest import Issued
from tests.probing.servers import tls_server

pytestmark = pytest.mark.django_db

# Each certificate's endpoints (by state), and the word the certificate gets: the worst wins.
WORLD: dict[str, tuple[tuple[str, ...], str]] = {
    "stale": (("Deployed", "Stale", "Mismatch"), "Stale"),
    "only-stale": (("Stale",), "Stale"),
    "foreign": (("Deployed", "Mismatch", "Unreachable"), "Mismatch"),
    "down": (("Unreachable", "Deploying"), "Unreachable"),
    "rolling": (("Deployed", "Deploying"), "Deploying"),
    "new": (("Unchecked", "Deployed"), "Unchecked"),
    "good": (("Deployed", "Deployed"), "Deployed"),
    "plain": ((), ""),
}


def _world(now: datetime) -> Issuer:
    issuer = make_selfsigned_issuer()
    for name, (states, _) in WORLD.items():
        cert = make_certificate(name, issuer)
        for i, state in enumerate(states):
            make_endpoint(cert, f"h{i}.{name}.example.test", state, now=now)
    return issuer


def test_the_filters_agree_with_each_certificates_word() -> None:
    now = timezone.now()
    _world(now)
    for cert in Certificate.objects.all():
        summary = deployment(cert.endpoints.all(), now)
        assert (summary["state"] if summary else "") == WORLD[cert.name][1], cert.name
    for endpoint in Endpoint.objects.all():
        assert Endpoint.objects.filter(endpoint_q(state_of(endpoint, now), now), pk=endpoint.pk)
    for state in STATES:
        names = set(Certificate.objects.filter(certificate_q(state, now)).values_list("name"))
        assert names == {(n,) for n, (_, word) in WORLD.items() if word == state}, state
    counts = certificate_counts(now)
    assert counts == {s: sum(1 for _, w in WORLD.values() if w == s) for s in STATES}
    assert endpoint_counts(now) == {
        "Stale": 2,
        "Mismatch": 2,
        "Unreachable": 2,
        "Deploying": 2,
        "Unchecked": 1,
        "Deployed": 6,
    }


def test_an_older_revision_becomes_stale_an_hour_after_the_new_one() -> None:
    now = timezone.now()
    cert = make_certificate("web", make_selfsigned_issuer())
    make_endpoint(cert, "web-1.example.test", "Deploying", now=now)  # issued 10 minutes ago
    assert certificate_counts(now)["Deploying"] == 1
    later = now + timedelta(minutes=51)
    assert certificate_counts(later)["Stale"] == 1
    # An endpoint added after the new revision counts its hour from when it was added.
    Endpoint.objects.update(created_at=now)
    assert certificate_counts(later)["Deploying"] == 1


# -- the dashboard card ------------------------------------------------------------------


def _client(make_user: Callable[..., User], role: str = "viewer") -> Client:
    client = Client()
    client.force_login(make_user(role, role))
    return client


def test_dashboard_card_counts_and_links_to_the_filtered_list(
    make_user: Callable[..., User],
) -> None:
    client = _client(make_user)
    html = client.get("/").content.decode()
    assert 'id="deploy-none"' in html  # no endpoints anywhere
    _world(timezone.now())
    html = client.get("/partials/dashboard/deployments/").content.decode()
    assert '<strong id="deploy-stale">2</strong> certificates deployed: stale' in html
    assert '<span id="deploy-mismatch">1</span>' in html
    assert '<span id="deploy-unreachable">1</span>' in html
    assert '<span id="deploy-deployed">1</span> deployed</a> of 7 with endpoints' in html
    assert 'href="/certificates/?deployed=stale"' in html
    assert 'href="/certificates/?deployed=mismatch"' in html
    assert 'id="dash-deployments"' in client.get("/").content.decode()


def test_dashboard_card_queries_do_not_grow_with_certificates(
    make_user: Callable[..., User], django_assert_max_num_queries: Callable[..., object]
) -> None:
    client = _client(make_user)
    client.get("/")  # the session's first request stores its sign-in stamps
    now = timezone.now()
    issuer = _world(now)
    with django_assert_max_num_queries(10) as few:  # type: ignore[attr-defined]
        assert client.get("/partials/dashboard/deployments/").status_code == 200
    for i in range(40):
        cert = make_certificate(f"more-{i}", issuer)
        make_endpoint(cert, "a.example.test", ("Stale", "Unreachable", "Deployed")[i % 3], now=now)
    with django_assert_max_num_queries(10) as many:  # type: ignore[attr-defined]
        html = client.get("/partials/dashboard/deployments/").content.decode()
    assert '<strong id="deploy-stale">16</strong>' in html  # 2 + 14
    assert len(many.captured_queries) == len(few.captured_queries)


# -- the list filter ---------------------------------------------------------------------


def _listed(html: str) -> set[str]:
    return {name for name in WORLD if f'href="/certificates/{name}/"' in html}


@pytest.mark.parametrize("value", FILTER_VALUES)
def test_list_filter_on_the_page(make_user: Callable[..., User], value: str) -> None:
    client = _client(make_user)
    _world(timezone.now())
    word = STATES[FILTER_VALUES.index(value)]
    response = client.get("/certificates/", {"deployed": value})
    assert response.status_code == 200
    html = response.content.decode()
    assert _listed(html) == {n for n, (_, w) in WORLD.items() if w == word}
    assert f'<option value="{value}" selected>' in html
    partial = client.get("/partials/certificates/", {"deployed": value}).content.decode()
    assert _listed(partial) == _listed(html)


def test_list_page_ignores_a_deployed_value_it_does_not_know(
    make_user: Callable[..., User],
) -> None:
    client = _client(make_user)
    _world(timezone.now())
    response = client.get("/certificates/", {"deployed": "sideways"})
    assert response.status_code == 200
    # As with the page's other filters, a value that is not one of the choices filters
    # nothing (the select cannot send one).
    assert _listed(response.content.decode()) == set(WORLD)


# -- the API filter ----------------------------------------------------------------------


def _api(make_user: Callable[..., User]) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=make_user("viewer", "viewer"))
    return client


def test_api_filter(make_user: Callable[..., User]) -> None:
    client = _api(make_user)
    _world(timezone.now())
    for value in FILTER_VALUES:
        word = STATES[FILTER_VALUES.index(value)]
        response = client.get("/api/v1/certificates/", {"deployed": value})
        assert response.status_code == 200, response.content
        body = response.json()
        items = body["results"] if isinstance(body, dict) else body
        assert {c["name"] for c in items} == {n for n, (_, w) in WORLD.items() if w == word}
        for item in items:
            deployed = item["status"]["deployment"]
            assert (deployed["state"] if deployed else "") == word
    both = client.get("/api/v1/certificates/", {"deployed": "stale", "search": "only"})
    body = both.json()
    items = body["results"] if isinstance(body, dict) else body
    assert [c["name"] for c in items] == ["only-stale"]


def test_api_filter_refuses_an_unknown_value(make_user: Callable[..., User]) -> None:
    response = _api(make_user).get("/api/v1/certificates/", {"deployed": "Stale"})
    assert response.status_code == 400
    assert response.json() == {
        "deployed": [
            "must be one of: stale, mismatch, unreachable, deploying, unchecked, deployed, none"
        ]
    }


def test_api_schema_states_the_allowed_values(make_user: Callable[..., User]) -> None:
    schema = _api(make_user).get("/api/schema/", {"format": "json"}).json()
    parameters = schema["paths"]["/api/v1/certificates/"]["get"]["parameters"]
    [deployed] = [p for p in parameters if p["name"] == "deployed"]
    assert deployed["schema"] == {"type": "string", "enum": list(FILTER_VALUES)}
    assert "none for those with no endpoints" in deployed["description"]


# -- metrics -----------------------------------------------------------------------------


def test_deployment_gauges() -> None:
    _world(timezone.now())
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    samples: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            if sample.name in ("issuance_certificate_deployments", "issuance_endpoints"):
                samples[(sample.name, sample.labels["state"])] = sample.value
    certs = {s: v for (n, s), v in samples.items() if n == "issuance_certificate_deployments"}
    assert certs == {
        "Stale": 2,
        "Mismatch": 1,
        "Unreachable": 1,
        "Deploying": 1,
        "Unchecked": 1,
        "Deployed": 1,
        "none": 1,
    }
    endpoints = {s: v for (n, s), v in samples.items() if n == "issuance_endpoints"}
    assert endpoints["Stale"] == 2
    assert endpoints["Deployed"] == 6
    assert sum(endpoints.values()) == Endpoint.objects.count()


# -- end to end ------------------------------------------------------------------------


def test_a_server_left_on_the_old_revision_is_counted_and_reported_once(
    issued: Issued, make_user: Callable[..., User]
) -> None:
    """Real probes of a real TLS server: revision 1 served an hour after revision 2 was
    issued is stale on the dashboard and in one message; reloaded, it resolves."""
    with http_receiver() as receiver:
        channel = NotificationChannel(name="ops")
        channel.url = f"json://127.0.0.1:{receiver.port}/hook"
        channel.save()
        NotificationRule.objects.create(
            name="stale",
            channel=channel,
            condition=NotificationCondition.ENDPOINT_STALE,
            notify_resolved=True,
        )
        old = issued.revisions[1]
        with tls_server(old.chain, old.key) as port:
            endpoint = issued.endpoint(port)
            runner.probe_endpoint(endpoint.pk)
        # Added, and revision 2 issued, two hours ago.
        Endpoint.objects.filter(pk=endpoint.pk).update(
            created_at=timezone.now() - timedelta(hours=2)
        )
        now = timezone.now()
        assert certificate_counts(now)["Stale"] == 1
        client = _client(make_user)
        html = client.get("/partials/dashboard/deployments/").content.decode()
        assert '<strong id="deploy-stale">1</strong> certificate deployed: stale' in html
        for minute in range(3):
            deliver.detect_pass(now + timedelta(minutes=minute))
            deliver.deliver_due(now + timedelta(minutes=minute))
        assert len(receiver.posts) == 1
        assert b"still serves revision 1, not the current revision 2" in receiver.posts[0].body
        new = issued.revisions[2]
        with tls_server(new.chain, new.key) as port:
            Endpoint.objects.filter(pk=endpoint.pk).update(port=port)
            runner.probe_endpoint(endpoint.pk)
        later = timezone.now() + timedelta(minutes=3)
        assert certificate_counts(later)["Deployed"] == 1
        for minute in range(3):
            deliver.detect_pass(later + timedelta(minutes=minute))
            deliver.deliver_due(later + timedelta(minutes=minute))
        assert len(receiver.posts) == 2
        assert b"serves the current revision (2)" in receiver.posts[1].body
