"""CA fallback against two scripted CAs: which server an order is made at, and why.

Real HTTP servers (tests/acme/fakeca.py), the real orders controller; each case checks
where newOrder was sent (the CAs' hit counters), what the Order row stores and the timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.acme import fallback, health, ratelimit
from issuance.acme.accounts import ensure_account_key
from issuance.acme.protocol.errors import AcmeUnreachableError
from issuance.controllers import orders
from issuance.controllers.base import TemporaryError
from issuance.models import AcmeServer, Certificate, CertificateRequest, Event, Issuer, Order
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from tests.acme.fakeca import FakeCA, Reply, problem
from tests.factories import make_certificate

pytestmark = pytest.mark.django_db


def acme_order(ca: FakeCA, n: int = 1) -> Reply:
    return Reply(
        201,
        {"status": "pending", "authorizations": [], "finalize": f"{ca.base}/finalize/{n}"},
        {"Location": f"{ca.base}/order/{n}"},
    )


@pytest.fixture
def second() -> Iterator[FakeCA]:
    server = FakeCA()
    yield server
    server.stop()
    fallback.forget_clients()


@pytest.fixture
def issuer(ca: FakeCA, second: FakeCA) -> Issuer:
    issuer = Issuer.objects.create(
        name="fake",
        kind="acme",
        spec={
            "acme": {
                "server": ca.directory_url,
                "email": "ops@example.com",
                "solvers": [{"http01": {}}],
                "fallback": [{"server": second.directory_url, "profile": "shortlived"}],
            }
        },
        acme_account_uri=f"{ca.base}/acct/1",
        conditions=[{"type": "Ready", "status": "True", "reason": "ACMEAccountRegistered"}],
    )
    ensure_account_key(issuer)
    return issuer


def new_order(issuer: Issuer, revision: int = 1) -> Order:
    cert = make_certificate("c", issuer, dnsNames=["a.example.test"]) if revision == 1 else None
    cert = cert or issuer.certificates.get(name="c")
    csr = build_csr(generate_private_key({"algorithm": "ECDSA"}), {"dnsNames": ["a.example.test"]})
    request = CertificateRequest.objects.create(
        name=f"c-{revision}",
        issuer=issuer,
        certificate=cert,
        revision=revision,
        spec={"request": csr, "issuerRef": {"name": issuer.name}},
        approval="Approved",
    )
    return Order.objects.create(
        name=f"c-{revision}-o",
        request=request,
        issuer=issuer,
        spec={"request": request.name, "dnsNames": ["a.example.test"], "ipAddresses": []},
    )


def reasons(order: Order) -> list[str]:
    return list(
        Event.objects.filter(kind="Order", name=order.name)
        .order_by("id")
        .values_list("reason", flat=True)
    )


def test_healthy_first_server_is_used_and_no_fallback_account_is_made(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ca.on("/new-order", acme_order(ca))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert (order.server, order.server_index) == (ca.directory_url, 0)
    assert order.url == f"{ca.base}/order/1"
    assert second.hits["/new-order"] == second.hits["/acct"] == 0
    assert Issuer.objects.get(pk=issuer.pk).acme_fallback_accounts == {}
    assert "FallbackServer" not in reasons(order)


def test_unreachable_first_server_sends_the_order_to_the_fallback(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    second.on("/new-order", acme_order(second))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert ca.hits["/new-order"] == 0
    assert second.hits["/new-order"] == 1 and second.hits["/acct"] == 1
    assert (order.server, order.server_index) == (second.directory_url, 1)
    assert order.url == f"{second.base}/order/1"
    # The fallback's own profile and the first server's contact.
    assert second.payloads["/new-order"]["profile"] == "shortlived"
    assert second.payloads["/acct"]["contact"] == ["mailto:ops@example.com"]
    accounts = Issuer.objects.get(pk=issuer.pk).acme_fallback_accounts
    assert accounts[second.directory_url]["uri"] == f"{second.base}/acct/1"
    entry = Event.objects.get(kind="Order", name=order.name, reason="FallbackServer")
    assert f"{second.directory_url} (fallback 1)" in entry.message
    assert "connection refused" in entry.message


def test_paused_first_server_sends_the_order_to_the_fallback(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ratelimit.record_pause(ca.directory_url, timedelta(minutes=30), "rateLimited: too many")
    second.on("/new-order", acme_order(second))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert ca.hits["/new-order"] == 0 and order.server_index == 1
    assert "paused until" in Event.objects.get(name=order.name, reason="FallbackServer").message


def test_a_ca_that_refuses_the_order_is_not_asked_again_and_the_next_is(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ca.on("/new-order", problem(400, "rejectedIdentifier", "a.example.test is forbidden"))
    second.on("/new-order", acme_order(second))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert ca.hits["/new-order"] == 1 and second.hits["/new-order"] == 1
    assert order.server_index == 1 and not order.is_final
    [refusal] = order.server_refusals
    assert refusal["server"] == ca.directory_url
    assert "rejectedIdentifier" in refusal["reason"]
    assert reasons(order)[:2] == ["ServerRefused", "FallbackServer"]


def test_every_server_refusing_fails_the_order_with_the_last_refusal(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ca.on("/new-order", problem(400, "rejectedIdentifier", "not here"))
    second.on("/new-order", problem(403, "unauthorized", "not here either"))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "invalid"
    assert order.reason == "urn:ietf:params:acme:error:unauthorized: not here either"
    assert len(order.server_refusals) == 2


def test_a_problem_any_ca_would_have_is_not_sent_elsewhere(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ca.on("/new-order", problem(400, "malformed", "bad identifiers"))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "errored" and second.hits["/new-order"] == 0


def test_a_refused_connection_at_new_order_moves_on_in_the_same_pass(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    """The first CA just went away (nothing recorded yet): the connection is refused, so the
    request was never sent and nothing can exist there; the fallback takes the order."""
    ca.stop()
    second.on("/new-order", acme_order(second))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.server_index == 1 and order.url == f"{second.base}/order/1"
    assert health.outage_of_server(ca.directory_url) is not None
    assert "ServerSkipped" in reasons(order)


def test_every_server_down_waits_for_the_nearest_with_nothing_attempted(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    ratelimit.record_pause(second.directory_url, timedelta(minutes=10), "rateLimited: slow down")
    order = new_order(issuer)
    with pytest.raises(AcmeUnreachableError) as info:
        orders.reconcile(order)
    delay = info.value.delay
    assert delay is not None
    # The first server's next probe (2.5 s), not the fallback's 10-minute pause.
    assert timedelta(seconds=1) <= delay <= health.FIRST_PROBE
    assert "paused until" in str(info.value)
    order.refresh_from_db()
    assert order.create_attempted_at is None and order.server == ""
    assert ca.hits["/new-order"] == second.hits["/new-order"] == 0


def test_fallback_outage_and_refusal_together_wait_with_a_temporary_error(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    ca.on("/new-order", problem(400, "rejectedIdentifier", "not here"))
    ratelimit.record_pause(second.directory_url, timedelta(minutes=10), "rateLimited: slow down")
    order = new_order(issuer)
    with pytest.raises(TemporaryError) as info:
        orders.reconcile(order)
    assert info.value.delay is not None
    assert timedelta(minutes=9) < info.value.delay <= timedelta(minutes=10)
    order.refresh_from_db()
    assert not order.is_final and len(order.server_refusals) == 1


def test_renewal_returns_to_the_first_server_when_it_is_back(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    second.on("/new-order", acme_order(second))
    first = new_order(issuer)
    orders.reconcile(first)
    health.record_answer(ca.directory_url, probe=True)  # the probe got an answer
    ca.on("/new-order", acme_order(ca, 2))
    renewal = new_order(issuer, revision=2)
    orders.reconcile(renewal)
    renewal.refresh_from_db()
    assert (renewal.server, renewal.server_index) == (ca.directory_url, 0)
    assert second.hits["/new-order"] == 1 and ca.hits["/new-order"] == 1


def test_an_interrupted_attempt_is_recovered_at_its_server_never_another(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    """A worker died between storing the choice (the fallback) and newOrder's answer: the
    next pass asks that same server again (the first one is healthy meanwhile)."""
    order = new_order(issuer)
    Order.objects.filter(pk=order.pk).update(
        server=second.directory_url, server_index=1, create_attempted_at=timezone.now()
    )
    order.refresh_from_db()
    second.on("/new-order", acme_order(second))
    orders.reconcile(order)
    order.refresh_from_db()
    assert ca.hits["/new-order"] == 0 and second.hits["/new-order"] == 1
    assert order.server_index == 1 and order.url == f"{second.base}/order/1"


def test_a_fallback_recorded_unreachable_is_probed_when_due_and_used(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    health.record_failure(ca.directory_url, "connection refused", probe=False)
    health.record_failure(second.directory_url, "connection refused", probe=False)
    AcmeServer.objects.filter(directory_url=second.directory_url).update(
        probe_at=timezone.now() - timedelta(seconds=1)
    )
    health.forget()
    second.on("/new-order", acme_order(second))
    order = new_order(issuer)
    orders.reconcile(order)
    order.refresh_from_db()
    assert second.hits["/dir"] >= 1, "the fallback was probed"
    assert health.outage_of_server(second.directory_url) is None
    assert order.server_index == 1 and order.url == f"{second.base}/order/1"


def test_issued_by_annotation_names_the_server_of_the_newest_valid_order(
    ca: FakeCA, second: FakeCA, issuer: Issuer
) -> None:
    old = new_order(issuer)
    Order.objects.filter(pk=old.pk).update(state="valid")  # from before fallbacks: server ""
    cert = fallback.with_issued_by(Certificate.objects.filter(name="c")).get()
    assert _issued_by(cert) == (
        ca.directory_url,
        0,
        old.name,
    )
    newer = new_order(issuer, revision=2)
    Order.objects.filter(pk=newer.pk).update(
        state="valid", server=second.directory_url, server_index=1
    )
    cert = fallback.with_issued_by(Certificate.objects.filter(name="c")).get()
    assert _issued_by(cert) == (
        second.directory_url,
        1,
        newer.name,
    )
    assert fallback.issued_by_many([cert.pk])[cert.pk]["fallback"] == 1


def _issued_by(cert: Certificate) -> tuple[object, object, object]:
    """The annotations fallback.with_issued_by adds (not model fields)."""
    return (
        getattr(cert, "issued_server"),  # noqa: B009
        getattr(cert, "issued_index"),  # noqa: B009
        getattr(cert, "issued_order"),  # noqa: B009
    )
