"""issuance.observability.publish: what is sent, to which topics, and only after commit, once per object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from issuance.models import Certificate, CertificateRequest, Challenge, Order
from issuance.observability import publish
from tests.dbfaults import unreachable
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db(transaction=True)

Sent = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def sent() -> Iterator[Sent]:
    messages: Sent = []

    def record(topic: str, message: dict[str, Any]) -> None:
        messages.append((topic, message))

    publish.subscribe(record)
    yield messages
    publish.unsubscribe(record)


def of_type(sent: Sent, type_: str) -> Sent:
    return [(t, m) for t, m in sent if m["type"] == type_]


def make_chain(
    cert: Certificate, n_challenges: int = 2
) -> tuple[CertificateRequest, Order, list[Challenge]]:
    req = CertificateRequest.objects.create(
        name=f"{cert.name}-1", issuer=cert.issuer, certificate=cert, revision=1, spec={}
    )
    order = Order.objects.create(name=f"{cert.name}-1-o", request=req, issuer=cert.issuer, spec={})
    challenges = [
        Challenge.objects.create(
            name=f"{cert.name}-1-c{i}",
            order=order,
            issuer=cert.issuer,
            dns_name=f"d{i}.example.test",
            type="http-01",
            authorization_url=f"https://ca.test/authz/{i}",
            token=f"tok{i}",
            spec={},
        )
        for i in range(n_challenges)
    ]
    return req, order, challenges


def test_sent_after_commit_once_per_object_with_last_state(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    sent.clear()
    with transaction.atomic():
        cert = make_certificate("web", issuer)
        for revision in (1, 2, 3):
            cert.revision = revision
            cert.save()
        assert sent == [], "published before commit"
    status = of_type(sent, "certificate.status")
    assert [t for t, _ in status] == ["dashboard", "certificate:web"]
    assert {m["revision"] for _, m in status} == {3}
    message = status[0][1]
    assert message["name"] == "web"
    assert message["state"] == "Pending"
    assert message["ready"] is False
    assert message["at"]


def test_rollback_sends_nothing(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    sent.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        make_certificate("never", issuer)
        raise RuntimeError("abort")
    assert sent == []
    assert not Certificate.objects.filter(name="never").exists()


def test_rolled_back_savepoint_does_not_swallow_later_saves(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    sent.clear()
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            make_certificate("inner", issuer)  # opens the batch inside the savepoint
            raise RuntimeError("abort savepoint")
        make_certificate("outer", issuer)
    names = {m["name"] for _, m in of_type(sent, "certificate.status")}
    assert names == {"outer"}


def test_timestamps_are_absolute_iso(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("backoff", issuer)
    sent.clear()
    from datetime import timedelta

    from django.utils import timezone

    retry = timezone.now() + timedelta(hours=1)
    cert.next_retry_time = retry
    cert.failed_issuance_attempts = 1
    cert.save()  # autocommit: sent at once
    (_, message), *_ = of_type(sent, "certificate.status")
    assert message["nextRetryTime"] == retry.isoformat()
    assert message["failedIssuanceAttempts"] == 1


def test_worker_bookkeeping_saves_are_not_news(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("quiet", issuer)
    sent.clear()
    cert.lease_owner = "worker-1"
    cert.save(update_fields=["lease_owner", "lease_until", "due_at"])
    assert sent == []
    cert.state = "Issuing"
    cert.save(update_fields=["state", "due_at"])
    assert [m["state"] for _, m in of_type(sent, "certificate.status")] == ["Issuing", "Issuing"]


def test_challenges_reach_their_certificate_and_nudge_the_dashboard_once(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("chain", issuer)
    sent.clear()
    with transaction.atomic():
        _req, order, challenges = make_chain(cert)
        for ch in challenges:
            ch.processing = True
            ch.save()
    requests = of_type(sent, "request.status")
    assert sorted(t for t, _ in requests) == ["certificate:chain", "dashboard"]
    assert all(m["certificate"] == "chain" for _, m in requests)
    orders = of_type(sent, "order.status")
    assert [(t, m["name"]) for t, m in orders] == [("certificate:chain", order.name)]
    chals = of_type(sent, "challenge.status")
    assert sorted(m["name"] for _, m in chals) == sorted(c.name for c in challenges)
    assert {t for t, _ in chals} == {"certificate:chain"}
    assert all(m["processing"] is True and m["certificate"] == "chain" for _, m in chals)
    nudges = of_type(sent, "dashboard.changed")
    assert nudges == [("dashboard", nudges[0][1])]
    assert nudges[0][1]["kinds"] == ["Challenge", "Order"]


def test_external_request_goes_to_the_dashboard_only(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    sent.clear()
    CertificateRequest.objects.create(name="kubelet-csr", issuer=issuer, spec={})
    requests = of_type(sent, "request.status")
    assert [(t, m["certificate"], m["approval"]) for t, m in requests] == [
        ("dashboard", None, "Pending")
    ]


def test_a_failing_subscriber_never_breaks_the_save(sent: Sent) -> None:
    def broken(topic: str, message: dict[str, Any]) -> None:
        raise ConnectionError("redis is down")

    publish.subscribe(broken)
    try:
        issuer = make_selfsigned_issuer()
        with transaction.atomic():
            make_certificate("robust", issuer)
    finally:
        publish.unsubscribe(broken)
    assert Certificate.objects.filter(name="robust").exists()
    assert of_type(sent, "certificate.status"), "later subscribers were skipped"


def test_certificate_deleted(sent: Sent) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("gone", issuer)
    sent.clear()
    cert.delete()
    assert [(t, m["type"]) for t, m in sent] == [
        ("dashboard", "certificate.deleted"),
        ("certificate:gone", "certificate.deleted"),
    ]


def test_an_outage_at_the_owner_lookup_logs_one_line_and_sends_the_rest(
    sent: Sent, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner lookup after commit meets a database that just went away (a kill): the
    updates still go out, without their certificate, and the log gets one warning line,
    not a traceback (the outage itself is logged once by the availability code)."""
    issuer = make_selfsigned_issuer()
    cert = make_certificate("outage", issuer)
    sent.clear()
    lookup = '"issuance_certificate"."name"'  # the owner lookup's select; not the inserts
    failing = unreachable(lambda sql: lookup in sql and sql.lstrip().startswith("SELECT"))
    with failing, transaction.atomic():
        CertificateRequest.objects.create(
            name="outage-1", issuer=issuer, certificate=cert, revision=1, spec={}
        )
    requests = of_type(sent, "request.status")
    assert [(t, m["name"]) for t, m in requests] == [("dashboard", "outage-1")]
    assert requests[0][1]["certificate"] is None
    lines = [r for r in caplog.records if r.name == "issuance.observability.publish"]
    assert [(r.levelname, r.exc_info) for r in lines] == [("WARNING", None)]
    assert "owning certificates not resolved (connection failed" in lines[0].getMessage()
    assert "\n" not in lines[0].getMessage()
