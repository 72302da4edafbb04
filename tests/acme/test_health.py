"""A CA that does not answer: recorded once, asked by one probe at a time, cleared by its
first answer, and shown on the issuer, its certificates, the dashboard, the API and /metrics.

Against the scripted CA (tests/acme/fakeca.py), stopped for "connection refused" and
started again on the same port; the timed-out case with a hanging reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.acme import health
from issuance.acme import issuer as acme_issuer
from issuance.acme.accounts import account_config, client_for, ensure_account_key
from issuance.acme.protocol import client as acme_client
from issuance.acme.protocol.errors import AcmeUnreachableError
from issuance.acme.protocol.exchange import server_stats
from issuance.controllers import orders
from issuance.models import AcmeServer, Challenge, Event, Issuer, Order
from issuance.observability.metrics import REGISTRY
from issuance.shapes import Condition
from tests.acme.fakeca import FakeCA, Reply
from tests.acme.test_orders_unit import make_request
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db


def registered_issuer(ca: FakeCA, name: str = "fake") -> Issuer:
    issuer = Issuer.objects.create(
        name=name,
        kind="acme",
        spec={"acme": {"server": ca.directory_url, "solvers": [{"http01": {}}]}},
        acme_account_uri=f"{ca.base}/acct/1",
        conditions=[{"type": "Ready", "status": "True", "reason": "ACMEAccountRegistered"}],
        observed_generation=1,
    )
    ensure_account_key(issuer)
    issuer.acme_account_fingerprint = account_config(issuer).fingerprint()
    issuer.save()
    return issuer


def server(ca: FakeCA) -> AcmeServer:
    return AcmeServer.objects.get(directory_url=ca.directory_url)


def probe_due(ca: FakeCA) -> None:
    """Let the probe's time come (a test does not wait out the real interval)."""
    AcmeServer.objects.filter(directory_url=ca.directory_url).update(
        probe_at=timezone.now() - timedelta(seconds=1)
    )
    health.forget()


def seconds_until(when: Any) -> float:
    return float((when - timezone.now()).total_seconds())


def ready(issuer: Issuer) -> Condition:
    issuer.refresh_from_db()
    cond = issuer.get_condition("Ready")
    assert cond is not None
    return cond


def test_refused_connection_marks_the_ca_unreachable_and_later_calls_wait(ca: FakeCA) -> None:
    issuer = registered_issuer(ca)
    client = client_for(issuer)
    ca.stop()
    with pytest.raises(AcmeUnreachableError) as info:
        client.get_order(f"{ca.base}/order/1")
    row = server(ca)
    assert row.unreachable_since is not None
    assert row.unreachable_error == "connection refused"
    assert row.failed_requests == 1
    assert row.probe_at is not None
    assert row.probe_at - row.unreachable_since == health.FIRST_PROBE
    assert str(info.value).startswith("CAUnreachable: connection refused since ")
    # Woken when the CA answers; the delay is only the safety net.
    assert info.value.delay is not None
    assert info.value.delay > health.WAIT_FALLBACK

    sent = server_stats(ca.directory_url)
    assert sent == {"network_error": 1}
    for _ in range(3):
        with pytest.raises(AcmeUnreachableError):
            client.get_order(f"{ca.base}/order/1")
    assert server_stats(ca.directory_url) == sent, "nothing is sent before the probe"
    assert server(ca).failed_requests == 1
    entries = Event.objects.filter(kind="Issuer", name=issuer.name, reason="CAUnreachable")
    assert [e.message for e in entries] == [
        f"The ACME server {ca.directory_url} does not answer: connection refused"
    ]
    assert entries[0].type == Event.WARNING
    issuer.refresh_from_db()
    assert issuer.due_at is not None and issuer.due_at <= timezone.now(), "issuer woken"


def test_a_request_that_times_out_is_not_repeated(
    ca: FakeCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acme_client, "READ_TIMEOUT", 0.3)
    client = client_for(registered_issuer(ca))
    ca.on("/order/4", Reply(200, {"status": "ready"}, delay=1.0), Reply(200, {"status": "ready"}))
    with pytest.raises(AcmeUnreachableError, match=r"no answer within 0\.3s"):
        client.get_order(f"{ca.base}/order/4")
    # The fake CA counts a request when its thread reads it, which on a loaded machine can
    # come after the client's 0.3 s have run out; a repeat would have been sent before the
    # client gave up, so once the first is counted and the slow reply is over, one it is.
    wait_for(lambda: ca.hits["/order/4"], 10, "the request reaching the CA")
    time.sleep(1.0)
    assert ca.hits["/order/4"] == 1
    assert server(ca).unreachable_error == "no answer within 0.3s"
    assert server_stats(ca.directory_url).get("timeout") == 1


def test_one_probe_at_a_time_and_the_interval_grows_to_its_cap(ca: FakeCA) -> None:
    url = ca.directory_url
    health.record_failure(url, "connection refused", probe=False)
    probe_due(ca)
    assert health.gate(url) is True
    with pytest.raises(AcmeUnreachableError):
        health.gate(url)  # the running probe holds the turn
    assert seconds_until(server(ca).probe_at) == pytest.approx(45, abs=2)
    for expected in (5, 10, 20, 20):
        probe_due(ca)
        assert health.gate(url) is True
        health.record_failure(url, "connection refused", probe=True)
        assert seconds_until(server(ca).probe_at) == pytest.approx(expected, abs=1)
    row = server(ca)
    assert (row.probes, row.failed_requests) == (4, 5)


def test_the_issuer_shows_the_outage_probes_and_recovers_without_registering_again(
    ca: FakeCA,
) -> None:
    issuer = registered_issuer(ca)
    port = ca.port
    ca.stop()
    with pytest.raises(AcmeUnreachableError):
        client_for(issuer).get_order(f"{ca.base}/order/1")

    result = acme_issuer.reconcile_issuer(issuer)
    cond = ready(issuer)
    assert (cond["status"], cond["reason"]) == ("False", "CAUnreachable")
    assert cond["message"].startswith("connection refused since ")
    assert result.requeue_after is not None
    assert 1 <= result.requeue_after.total_seconds() <= 3, "due again for the first probe"
    # The condition change writes no entry of its own: one per outage, from health.py.
    assert Event.objects.filter(name=issuer.name, type=Event.WARNING).count() == 1

    probe_due(ca)
    result = acme_issuer.reconcile_issuer(issuer)  # the probe, refused
    assert result.requeue_after is not None
    assert 4 <= result.requeue_after.total_seconds() <= 6
    assert (server(ca).probes, server(ca).failed_requests) == (1, 2)

    back = FakeCA(port)
    try:
        probe_due(ca)
        assert acme_issuer.reconcile_issuer(issuer).requeue_after == timedelta(0)
        row = server(ca)
        assert row.unreachable_since is None
        assert row.reachable_again_at is not None
        assert row.failed_requests == 2, "kept as the last outage's count"
        acme_issuer.reconcile_issuer(issuer)
        cond = ready(issuer)
        assert (cond["status"], cond["reason"]) == ("True", "ACMEAccountRegistered")
        assert back.hits["/dir"] == 1, "one probe"
        assert back.hits["/acct"] == 0, "the account stands: not registered again"
    finally:
        back.stop()
    recovered = Event.objects.get(name=issuer.name, reason="CAReachable")
    assert recovered.message.startswith(f"The ACME server {ca.directory_url} answers again after ")
    assert recovered.message.endswith("(2 requests failed meanwhile)")
    assert Event.objects.filter(name=issuer.name).count() == 2


def test_an_answer_wakes_everything_that_waited_on_the_ca(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    later = timezone.now() + timedelta(minutes=2)
    Order.objects.filter(pk=order.pk).update(due_at=later, error_count=3, last_error="x")
    other = make_request_for_idle_order(ca)
    idle_due = Order.objects.get(pk=other.pk).due_at
    chal = Challenge.objects.create(
        name="chal",
        order=order,
        issuer=order.issuer,
        dns_name="a.example.test",
        type="http-01",
        authorization_url=f"{ca.base}/authz/1",
        token="t",
        spec={},
        due_at=later,
        error_count=1,
    )
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    ca.default["/order/1"] = Reply(200, {"status": "pending"})
    probe_due(ca)
    client_for(order.issuer).get_order(f"{ca.base}/order/1")  # the probe, answered
    now = timezone.now()
    order.refresh_from_db()
    chal.refresh_from_db()
    assert order.due_at is not None and order.due_at <= now
    assert chal.due_at is not None and chal.due_at <= now
    assert Order.objects.get(pk=other.pk).due_at == idle_due, "rows that did not wait stay"
    assert server(ca).unreachable_since is None


def make_request_for_idle_order(ca: FakeCA) -> Order:
    """A second order of the same issuer, waiting for its challenges (no error)."""
    issuer = Issuer.objects.get(name="fake")
    from issuance.models import CertificateRequest

    base = CertificateRequest.objects.get(name="c-1")
    idle = CertificateRequest.objects.create(
        name="c-2",
        issuer=issuer,
        certificate=base.certificate,
        revision=2,
        spec=base.spec,
        approval="Approved",
    )
    acme_issuer.sign(idle)
    order = Order.objects.get(request=idle)
    Order.objects.filter(pk=order.pk).update(due_at=timezone.now() + timedelta(minutes=5))
    return order


def test_a_new_order_is_not_attempted_while_the_ca_is_unreachable(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    probe_due(ca)  # even when a probe is due: newOrder is never the probe
    with pytest.raises(AcmeUnreachableError):
        orders.reconcile(order)
    order.refresh_from_db()
    assert order.create_attempted_at is None
    assert not order.is_final and order.failure_time is None
    assert ca.hits["/new-order"] == 0


def test_metrics_report_the_outage_and_requests_per_server(ca: FakeCA) -> None:
    url = ca.directory_url
    ca.stop()
    with pytest.raises(AcmeUnreachableError):
        client_for(registered_issuer(ca)).get_order(f"{ca.base}/order/1")
    labels = {"directory_url": url}
    since = REGISTRY.get_sample_value(
        "issuance_acme_server_unreachable_since_timestamp_seconds", labels
    )
    unreachable_since = server(ca).unreachable_since
    assert unreachable_since is not None
    assert since == pytest.approx(unreachable_since.timestamp())
    assert REGISTRY.get_sample_value("issuance_acme_server_outage_failed_requests", labels) == 1
    sent = REGISTRY.get_sample_value(
        "issuance_acme_server_requests_total", {"server": url, "result": "network_error"}
    )
    assert sent is not None and sent >= 1


def test_pages_and_api_show_the_outage_escaped(
    ca: FakeCA, client_for_role: Callable[[str], Client], api_viewer: Any
) -> None:
    from tests.factories import make_certificate

    issuer = registered_issuer(ca)
    make_certificate("waiting", issuer)
    error = "<script>alert(1)</script> connection refused"
    health.record_failure(ca.directory_url, error, probe=False)
    health.forget()
    web = client_for_role("viewer")
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; connection refused"
    for path in (
        "/",
        "/issuers/",
        "/certificates/",
        "/certificates/waiting/",
        "/partials/dashboard/ca/",
    ):
        # <wbr>: line-break points in long values (the `breakable` filter), not text.
        page = web.get(path).content.decode().replace("<wbr>", "")
        assert escaped in page, path
        assert error not in page, path
        assert "ca-unreachable" in page, path

    body = api_viewer.get(f"/api/v1/issuers/{issuer.name}/").json()
    ca_status = body["status"]["ca"]
    assert ca_status["server"] == ca.directory_url
    assert ca_status["reachable"] is False
    assert ca_status["lastError"] == error
    assert ca_status["failedRequests"] == 1
    assert ca_status["unreachableSince"]
    cert = api_viewer.get("/api/v1/certificates/waiting/").json()
    assert cert["status"]["caUnreachable"]["reason"].startswith(f"CAUnreachable: {error} since ")

    ca.on("/order/1", Reply(200, {"status": "pending"}))
    probe_due(ca)
    client_for(issuer).get_order(f"{ca.base}/order/1")
    health.forget()
    assert "ca-unreachable" not in web.get("/certificates/waiting/").content.decode()
    assert "Every ACME server answers." in web.get("/").content.decode()
    assert api_viewer.get("/api/v1/certificates/waiting/").json()["status"]["caUnreachable"] is None
    assert api_viewer.get(f"/api/v1/issuers/{issuer.name}/").json()["status"]["ca"]["reachable"]


@pytest.fixture
def client_for_role(role_users: dict[str, User]) -> Callable[[str], Client]:
    def make(role: str) -> Client:
        web = Client()
        web.force_login(role_users[role])
        return web

    return make


@pytest.fixture
def api_viewer(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> Any:
    return api_client_for(role_users["viewer"])


@pytest.mark.django_db(transaction=True)
def test_live_updates_reach_the_dashboard_and_waiting_certificates(ca: FakeCA) -> None:
    from issuance.observability import publish
    from tests.factories import make_certificate

    issuer = registered_issuer(ca)
    make_certificate("waiting", issuer)
    done = make_certificate("done", issuer)
    type(done).objects.filter(pk=done.pk).update(state="Ready")
    sent: list[tuple[str, dict[str, Any]]] = []

    def record(topic: str, message: dict[str, Any]) -> None:
        sent.append((topic, message))

    publish.subscribe(record)
    try:
        health.record_failure(ca.directory_url, "connection refused", probe=False)
        down = [(t, m) for t, m in sent if m["type"] == "ca.reachability"]
        assert [t for t, _ in down] == ["certificate:waiting"], "not the Ready one"
        assert down[0][1]["reachable"] is False
        assert any(m["type"] == "dashboard.changed" and "AcmeServer" in m["kinds"] for _, m in sent)
        sent.clear()
        health.record_answer(ca.directory_url, probe=True)
        up = [m for t, m in sent if m["type"] == "ca.reachability"]
        assert [m["reachable"] for m in up] == [True]
    finally:
        publish.unsubscribe(record)


def test_a_server_no_issuer_uses_any_more_is_not_shown(ca: FakeCA) -> None:
    issuer = registered_issuer(ca)
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    health.forget()
    assert [o.directory_url for o in health.outages()] == [ca.directory_url]
    issuer.spec = {"acme": {"server": "https://elsewhere.example.test/dir"}}
    issuer.save()
    health.forget()
    assert health.outages() == []
    assert health.outage_of_issuer(issuer.pk) is None
