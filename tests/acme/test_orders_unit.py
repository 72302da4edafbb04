"""Orders controller and `sign` against a scripted CA: failures that Pebble cannot produce."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from issuance.acme import issuer as acme_issuer
from issuance.acme import ratelimit
from issuance.acme.accounts import account_config, ensure_account_key
from issuance.acme.issuer_waits import SAFETY_NET, IssuerWaitError
from issuance.controllers import orders
from issuance.controllers.base import TemporaryError
from issuance.issuers.base import SignState
from issuance.models import CertificateRequest, Challenge, Event, Issuer, Order
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from tests.acme.fakeca import FakeCA, Reply, problem
from tests.factories import make_certificate

pytestmark = pytest.mark.django_db


def make_request(
    ca: FakeCA, names: list[str], solvers: list[dict[str, Any]] | None = None
) -> CertificateRequest:
    issuer = Issuer.objects.create(
        name="fake",
        kind="acme",
        spec={"acme": {"server": ca.directory_url, "solvers": solvers or [{"http01": {}}]}},
        acme_account_uri=f"{ca.base}/acct/1",
        conditions=[{"type": "Ready", "status": "True", "reason": "ACMEAccountRegistered"}],
    )
    ensure_account_key(issuer)
    cert = make_certificate("c", issuer, dnsNames=names)
    csr = build_csr(generate_private_key({"algorithm": "ECDSA"}), {"dnsNames": names})
    return CertificateRequest.objects.create(
        name="c-1",
        issuer=issuer,
        certificate=cert,
        revision=1,
        spec={"request": csr, "issuerRef": {"name": "fake"}},
        approval="Approved",
    )


def test_sign_creates_one_order_and_waits(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test", "b.example.test"])
    first = acme_issuer.sign(request)
    again = acme_issuer.sign(request)
    assert first.state == again.state == SignState.PENDING
    assert first.requeue_after is None  # the order wakes the request
    order = Order.objects.get(request=request)
    assert Order.objects.count() == 1
    assert order.spec["dnsNames"] == ["a.example.test", "b.example.test"]
    assert order.spec["request"] == "c-1"
    assert order.due_at is not None


def test_ca_refusal_fails_the_order_and_the_request_with_the_problem(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    ca.on("/new-order", problem(400, "rejectedIdentifier", "a.example.test is forbidden"))
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "errored"
    assert order.reason == (
        "urn:ietf:params:acme:error:rejectedIdentifier: a.example.test is forbidden"
    )
    assert order.failure_time is not None
    outcome = acme_issuer.sign(request)
    assert outcome.state == SignState.FAILED
    assert outcome.reason == "OrderFailed: urn:ietf:params:acme:error:rejectedIdentifier"
    assert "a.example.test is forbidden" in outcome.message


def _errored_for_want_of_a_solver(request: CertificateRequest) -> Order:
    """The request's order after one reconcile: errored, as no solver fits its names."""
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "errored"
    assert "no configured challenge solver" in order.reason
    return order


def test_no_matching_solver_is_an_errored_order_without_calling_the_ca(ca: FakeCA) -> None:
    solvers = [{"selector": {"dnsZones": ["example.org"]}, "http01": {}}]
    request = make_request(ca, ["*.example.test"], solvers)
    order = _errored_for_want_of_a_solver(request)
    assert "*.example.test" in order.reason
    assert ca.hits["/new-order"] == 0
    outcome = acme_issuer.sign(request)
    assert outcome.state == SignState.FAILED


def test_paused_ca_is_not_attempted(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    ratelimit.record_pause(ca.directory_url, timedelta(seconds=90), "rateLimited")
    with pytest.raises(TemporaryError) as info:
        orders.reconcile(order)
    assert info.value.delay is not None
    assert info.value.delay > timedelta(seconds=80)
    order.refresh_from_db()
    assert order.create_attempted_at is None
    assert ca.hits["/new-order"] == 0


def test_lost_account_registers_again(ca: FakeCA) -> None:
    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    ca.on("/new-order", problem(400, "accountDoesNotExist", "no such account"))
    with pytest.raises(IssuerWaitError, match="registering again") as waiting:
        orders.reconcile(order)
    # Parked until the issuer registers again (the worker releases it with this delay).
    assert waiting.value.delay == SAFETY_NET
    parked_until = timezone.now() + SAFETY_NET
    Order.objects.filter(pk=order.pk).update(due_at=parked_until, error_count=1)
    issuer = Issuer.objects.get(name="fake")
    cond = issuer.get_condition("Ready")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "ErrAccountNotFound")
    order.refresh_from_db()
    assert not order.is_final

    ca.on("/acct", problem(400, "accountDoesNotExist", "no such account"))
    ca.on("/acct", Reply(201, {"status": "valid"}, {"Location": f"{ca.base}/acct/2"}))
    # Registered for this config: onlyReturnExisting first (refused), then a new account.
    issuer.acme_account_fingerprint = account_config(issuer).fingerprint()
    issuer.save()
    acme_issuer.reconcile_issuer(issuer)
    issuer.refresh_from_db()
    assert issuer.is_ready
    assert issuer.acme_account_uri == f"{ca.base}/acct/2"
    assert ca.hits["/acct"] == 2
    # The registration woke the parked order.
    order.refresh_from_db()
    assert order.due_at is not None
    assert order.due_at < parked_until - timedelta(minutes=5)


def test_a_certificate_for_another_key_is_refused(ca: FakeCA) -> None:
    """A CA that reuses orders may return a chain finalized with another request's CSR."""
    from tests.acme.pki import make_chain

    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    Order.objects.filter(pk=order.pk).update(
        url=f"{ca.base}/order/9", state="valid", certificate_url=f"{ca.base}/cert/9"
    )
    ca.default["/cert/9"] = Reply(200, make_chain("a.example.test", "I", "R"))
    order.refresh_from_db()
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "errored"
    assert "another CSR" in order.reason
    assert order.certificate_pem == ""
    assert acme_issuer.sign(request).state == SignState.FAILED


def test_restart_after_outage_needs_an_outage_during_the_attempt(ca: FakeCA) -> None:
    from issuance.controllers import order_retry
    from issuance.models import AcmeServer

    request = make_request(ca, ["a.example.test"])
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    order.url = f"{ca.base}/order/1"
    order.state = "pending"
    order.save()
    # No AcmeServer row (the CA always answered): a real failure.
    assert not order_retry.restart_after_outage(order, "invalid", "connection refused")
    server = AcmeServer.objects.create(directory_url=ca.directory_url)
    # An outage that ended before the order was created does not count either.
    server.reachable_again_at = order.created_at - timedelta(seconds=1)
    server.save()
    assert not order_retry.restart_after_outage(order, "invalid", "connection refused")
    # An errored order (our side's problem) never restarts.
    server.reachable_again_at = timezone.now()
    server.save()
    assert not order_retry.restart_after_outage(order, "errored", "no solver")

    assert order_retry.restart_after_outage(order, "invalid", "connection refused")
    order.refresh_from_db()
    assert (order.url, order.state, order.authorizations, order.reason) == ("", "", [], "")
    assert order.restarts[0]["url"] == f"{ca.base}/order/1"
    assert order.restarts[0]["reason"] == "connection refused"
    # The same outage cannot restart the new attempt: it ended before the restart.
    assert not order_retry.restart_after_outage(order, "invalid", "connection refused")
    # A CA unreachable right now does, up to MAX_RESTARTS in all.
    server.unreachable_since = server.reachable_again_at
    server.save()
    while order_retry.restart_after_outage(order, "expired", "authorization expired"):
        pass
    assert len(order.restarts) == order_retry.MAX_RESTARTS
    assert Event.objects.filter(reason="OrderRestarted", name=order.name).count() == 3


def test_an_order_committed_as_the_database_went_away_gets_its_timeline_entries(
    ca: FakeCA,
) -> None:
    """The pass whose Order insert committed while its answer was lost never recorded it
    (seen in tests/e2e/test_pg_outage_worker.py: 59 of 60 "Created"); the retry that finds
    the row records the entries it lacks, once."""
    request = make_request(ca, ["a.example.test"])
    order, created = acme_issuer.ensure_order(request)
    assert created
    Event.objects.filter(name__in=[order.name, request.name]).delete()  # the lost pass

    for _ in range(2):
        again, created = acme_issuer.ensure_order(request)
        assert (again.pk, created) == (order.pk, False)
    recorded = Event.objects.filter(reason__in=["Created", "OrderCreated"])
    assert sorted(recorded.values_list("kind", "name", "reason")) == [
        ("CertificateRequest", request.name, "OrderCreated"),
        ("Order", order.name, "Created"),
    ]


def _offer_one_http01_authorization(ca: FakeCA, name: str) -> None:
    """newOrder answers with one pending authorization for `name`, offering HTTP-01."""
    ca.on(
        "/new-order",
        Reply(
            201,
            {
                "status": "pending",
                "identifiers": [{"type": "dns", "value": name}],
                "authorizations": [f"{ca.base}/authz/1"],
                "finalize": f"{ca.base}/order/1/finalize",
            },
            {"Location": f"{ca.base}/order/1"},
        ),
    )
    ca.on(
        "/authz/1",
        Reply(
            200,
            {
                "status": "pending",
                "identifier": {"type": "dns", "value": name},
                "challenges": [
                    {"type": "http-01", "url": f"{ca.base}/chal/1", "token": "t0ken"},
                ],
            },
        ),
    )


@pytest.mark.parametrize("team", ["a", "b"])
def test_solvers_differing_only_by_match_labels_follow_the_certificates_labels(
    ca: FakeCA, team: str
) -> None:
    """cert-manager's matchLabels: the Challenge gets the solver whose labels are all on the
    Certificate that the Order's CertificateRequest belongs to."""
    solvers = [
        {"selector": {"matchLabels": {"team": "a"}}, "http01": {}},
        {"selector": {"matchLabels": {"team": "b"}}, "http01": {}},
    ]
    request = make_request(ca, ["a.example.test"], solvers)
    cert = request.certificate
    assert cert is not None
    cert.labels = {"team": team, "env": "prod"}
    cert.save(update_fields=["labels"])
    _offer_one_http01_authorization(ca, "a.example.test")
    acme_issuer.sign(request)
    order = Order.objects.get(request=request)
    orders.reconcile(order)
    order.refresh_from_db()
    assert order.state == "pending", order.reason
    [challenge] = Challenge.objects.filter(order=order)
    assert challenge.spec["solver"]["selector"]["matchLabels"] == {"team": team}


def test_no_solver_matches_the_certificates_labels(ca: FakeCA) -> None:
    """Without the labels a solver asks for, the order fails before the CA is asked."""
    solvers = [{"selector": {"matchLabels": {"team": "a"}}, "http01": {}}]
    request = make_request(ca, ["a.example.test"], solvers)
    order = _errored_for_want_of_a_solver(request)
    assert ca.hits["/new-order"] == 0
    assert not Challenge.objects.filter(order=order).exists()
