"""ARI (RFC 9773) against the scripted CA: renewalInfo polled by the certificates controller
when the CA's Retry-After says (clamped, spread), a window moved mid-test renewing within
one poll, and `replaces` in the next newOrder."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from issuance.acme import ari
from issuance.acme.accounts import ensure_account_key
from issuance.acme.protocol.certs import ari_cert_id, parse_retry_after
from issuance.controllers import certificaterequests, certificates, orders
from issuance.controllers.base import Result
from issuance.models import (
    Certificate,
    CertificateRequest,
    CertificateState,
    Event,
    Issuer,
    Order,
    Secret,
)
from tests.acme.fakeca import FakeCA, Reply, problem
from tests.factories import make_ca_issuer, make_certificate
from tests.helpers import drain

pytestmark = pytest.mark.django_db
EC = {"algorithm": "ECDSA", "size": 256}
H = timedelta(hours=1)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _acme_certificate(ca: FakeCA, name: str = "ari") -> Certificate:
    """A Ready certificate whose issuer is an ACME issuer at the scripted CA. Issued while
    that issuer was a CA issuer (which puts an AKI in the leaf, as every ACME CA does), then
    the issuer is turned into the ACME one, as if the scripted CA had issued it."""
    cert = make_certificate(name, make_ca_issuer(name="fake"), privateKey=EC)
    drain()
    Issuer.objects.filter(name="fake").update(
        kind="acme",
        spec={"acme": {"server": ca.directory_url, "solvers": [{"http01": {}}]}},
        acme_account_uri=f"{ca.base}/acct/1",
    )
    ensure_account_key(Issuer.objects.get(name="fake"))
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY and cert.revision == 1
    return cert


def _step(cert: Certificate) -> Result:
    cert.refresh_from_db()
    return certificates.reconcile(cert)


def _leaf(cert: Certificate) -> str:
    return Secret.objects.get(name=cert.secret_name).tls_crt


def _ari_hits(ca: FakeCA) -> int:
    return sum(n for path, n in ca.hits.items() if path.startswith("/ari/"))


def _clock_passes_next_check(cert: Certificate) -> None:
    """Time travel: the stored next check has come (nothing is shortened; the row says the
    interval has passed, as it would have after waiting)."""
    Certificate.objects.filter(pk=cert.pk).update(
        ari_next_check=timezone.now() - timedelta(seconds=1)
    )


# -- the poll --------------------------------------------------------------------------------


def test_window_polled_stored_and_moved_window_renews_within_one_poll(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    start, end = now + timedelta(days=30), now + timedelta(days=32)
    ca.renewal_window(_iso(start), _iso(end), retry_after="21600")
    result = _step(cert)
    cert.refresh_from_db()
    assert _ari_hits(ca) == 1
    assert ca.hits[f"/ari/{ari_cert_id(_leaf(cert))}"] == 1  # the RFC 9773 identifier
    assert (cert.ari_window_start, cert.ari_window_end) == (start, end)
    assert cert.ari_checked_at is not None and cert.ari_next_check is not None
    # Retry-After 6 h, spread ±10 %.
    assert cert.ari_next_check is not None and cert.ari_checked_at is not None
    assert cert.ari_window_start is not None and cert.ari_window_end is not None
    assert cert.renewal_time is not None
    wait = cert.ari_next_check - cert.ari_checked_at
    assert 5.4 * H <= wait <= 6.6 * H
    assert cert.renewal_time == cert.ari_renewal_time
    assert cert.ari_window_start <= cert.renewal_time <= cert.ari_window_end
    assert not cert.condition_is("Issuing")
    # The controller comes back at the next check (the soonest moment), never sleeping.
    assert result.requeue_after is not None
    assert result.requeue_after <= wait + timedelta(seconds=1)

    # Not due: another pass does not ask the CA.
    Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now())
    _step(cert)
    assert _ari_hits(ca) == 1

    # The CA moves the window into the past (a mass revocation): the next poll renews.
    past_start, past_end = now - timedelta(days=2), now - timedelta(days=1)
    ca.renewal_window(_iso(past_start), _iso(past_end))
    _clock_passes_next_check(cert)
    _step(cert)
    cert.refresh_from_db()
    assert _ari_hits(ca) == 2
    issuing = cert.get_condition("Issuing")
    assert issuing is not None and issuing["reason"] == "Renewing"
    assert cert.ari_window_end == past_end
    # No Retry-After: twice a day, spread ±10 %.
    assert cert.ari_next_check is not None and cert.ari_checked_at is not None
    assert 10.8 * H <= cert.ari_next_check - cert.ari_checked_at <= 13.2 * H
    moved = Event.objects.get(certificate_name="ari", reason="RenewalInfoMoved")
    assert moved.type == Event.WARNING


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [
        ("30", 1 * H, 1.1 * H),  # a CA asking every 30 s gets hourly reads
        ("604800", 21.6 * H, 24 * H),  # a week: still read at least daily
        ("in-a-while", 10.8 * H, 13.2 * H),  # unreadable: as if absent
    ],
)
def test_retry_after_from_the_ca_is_clamped(
    ca: FakeCA, header: str, low: timedelta, high: timedelta
) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    ca.renewal_window(_iso(now + timedelta(days=30)), _iso(now + timedelta(days=31)), header)
    _step(cert)
    cert.refresh_from_db()
    assert cert.ari_next_check is not None and cert.ari_checked_at is not None
    assert low <= cert.ari_next_check - cert.ari_checked_at <= high


def test_retry_after_as_an_http_date(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    in_three_hours = format_datetime(now + 3 * H, usegmt=True)
    ca.renewal_window(
        _iso(now + timedelta(days=30)), _iso(now + timedelta(days=31)), in_three_hours
    )
    _step(cert)
    cert.refresh_from_db()
    assert cert.ari_next_check is not None and cert.ari_checked_at is not None
    assert 2.6 * H <= cert.ari_next_check - cert.ari_checked_at <= 3.3 * H


def test_window_moved_earlier_but_in_the_future_moves_the_renewal_time(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    ca.renewal_window(_iso(now + timedelta(days=50)), _iso(now + timedelta(days=52)))
    _step(cert)
    cert.refresh_from_db()
    first = cert.renewal_time
    assert first is not None
    ca.renewal_window(_iso(now + timedelta(days=5)), _iso(now + timedelta(days=6)))
    _clock_passes_next_check(cert)
    result = _step(cert)
    cert.refresh_from_db()
    assert cert.renewal_time is not None
    assert now + timedelta(days=5) - timedelta(seconds=1) <= cert.renewal_time < first
    assert not cert.condition_is("Issuing")
    assert result.requeue_after is not None  # back at the next check (≤ 13.2 h)
    assert result.requeue_after <= 13.2 * H


def test_unreachable_renewal_info_is_asked_again_in_about_an_hour(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    ca.default["/ari"] = problem(404, "malformed", "unknown certificate")
    _step(cert)
    cert.refresh_from_db()
    assert cert.ari_checked_at is None  # never read successfully
    assert cert.ari_next_check is not None
    assert cert.ari_next_check - timezone.now() <= 13.2 * H


def test_new_revision_forgets_the_old_window(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    ca.renewal_window(_iso(now + timedelta(days=30)), _iso(now + timedelta(days=31)))
    _step(cert)
    cert.refresh_from_db()
    assert cert.ari_window_start is not None
    ari.clear(cert)
    assert all(getattr(cert, f) is None for f in ari.ARI_FIELDS)


# -- Retry-After clamping and the spread ---------------------------------------------------


@pytest.mark.parametrize(
    ("retry_after", "low", "high"),
    [
        (None, 10.8 * H, 13.2 * H),  # absent: twice a day
        (timedelta(seconds=60), 1 * H, 1.1 * H),  # below the floor: 1 h
        (timedelta(0), 1 * H, 1.1 * H),
        (timedelta(hours=6), 5.4 * H, 6.6 * H),
        (timedelta(days=3), 21.6 * H, 24 * H),  # above the ceiling: 24 h
        (timedelta(hours=24), 21.6 * H, 24 * H),
    ],
)
def test_retry_after_is_clamped(
    retry_after: timedelta | None, low: timedelta, high: timedelta
) -> None:
    for draw in (0.0, 0.5, 0.999999):
        wait = ari.check_interval(retry_after, draw)
        assert low <= wait <= high, (retry_after, draw, wait)
    assert ari.check_interval(retry_after, 0.0) == low
    assert ari.check_interval(retry_after, 0.999999) == pytest.approx(
        high, abs=timedelta(seconds=1)
    )


def test_retry_after_header_forms() -> None:
    now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    assert parse_retry_after("3600") == timedelta(hours=1)
    assert parse_retry_after("Tue, 24 Nov 2026 18:00:00 GMT", now) == timedelta(hours=6)
    assert parse_retry_after("Tue, 24 Nov 2026 06:00:00 GMT", now) == timedelta(0)
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_a_thousand_certificates_do_not_poll_at_one_instant() -> None:
    # Same Retry-After for all (issued in the same minute): the next checks spread out.
    waits = [ari.check_interval(timedelta(hours=12)).total_seconds() for _ in range(1000)]
    assert min(waits) >= 10.8 * 3600 and max(waits) <= 13.2 * 3600
    # Uniform over 2.4 h: no minute holds more than a few of them (a burst would be 1000).
    per_minute: dict[int, int] = {}
    for wait in waits:
        per_minute[int(wait // 60)] = per_minute.get(int(wait // 60), 0) + 1
    assert max(per_minute.values()) < 25
    assert len(per_minute) > 120
    assert statistics.pstdev(waits) > 0.5 * 3600  # uniform over 2.4 h: σ ≈ 0.69 h


def test_chosen_points_spread_across_the_window() -> None:
    start = datetime(2031, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=2)
    points = {ari.ari_point(f"cert-{i}", start, end) for i in range(50)}
    assert len(points) == 50
    assert all(start <= p <= end for p in points)
    assert max(points) - min(points) > timedelta(days=1)
    # Stable per certificate: re-reading the same window keeps the renewal time.
    assert ari.ari_point("cert-1", start, end) == ari.ari_point("cert-1", start, end)


# -- replaces in newOrder ------------------------------------------------------------------


ORDER_REFUSED = problem(403, "unauthorized", "scripted: no order today")


def _renew_until_new_order(cert: Certificate) -> Order:
    """Force a renewal and drive it to the newOrder call (one reconcile per controller)."""
    Certificate.objects.filter(pk=cert.pk).update(
        renew_requested_at=timezone.now(), renew_requested_by="test"
    )
    _step(cert)
    request = CertificateRequest.objects.get(certificate=cert, revision=2)
    certificaterequests.reconcile(request)
    request.refresh_from_db()
    if Order.objects.filter(request=request).count() == 0:
        certificaterequests.reconcile(request)
    order = Order.objects.get(request=request)
    orders.reconcile(order)
    order.refresh_from_db()
    return order


def test_renewal_order_sends_replaces_with_the_previous_certificate_id(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    previous_id = ari_cert_id(_leaf(cert))
    ca.on("/new-order", ORDER_REFUSED)
    order = _renew_until_new_order(cert)
    assert order.spec["replaces"] == previous_id
    sent = ca.payloads_of("/new-order")
    assert len(sent) == 1
    assert sent[0]["replaces"] == previous_id
    assert [i["value"] for i in sent[0]["identifiers"]] == ["ari.example.test"]


def test_replaces_refused_is_retried_once_without_it(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    ca.on(
        "/new-order",
        problem(409, "alreadyReplaced", "certificate was already replaced"),
        ORDER_REFUSED,
    )
    order = _renew_until_new_order(cert)
    sent = ca.payloads_of("/new-order")
    assert len(sent) == 2
    assert "replaces" in sent[0] and "replaces" not in sent[1]
    refused = Event.objects.get(kind="Order", name=order.name, reason="ReplacesRefused")
    assert "alreadyReplaced" in refused.message


def test_other_refusals_are_not_retried(ca: FakeCA) -> None:
    cert = _acme_certificate(ca)
    ca.on("/new-order", problem(400, "rejectedIdentifier", "no such name"), Reply(500))
    _renew_until_new_order(cert)
    assert len(ca.payloads_of("/new-order")) == 1


def test_no_replaces_without_renewal_info_in_the_directory(ca: FakeCA) -> None:
    del ca.directory["renewalInfo"]
    cert = _acme_certificate(ca)
    ca.on("/new-order", ORDER_REFUSED)
    _renew_until_new_order(cert)
    sent = ca.payloads_of("/new-order")
    assert len(sent) == 1 and "replaces" not in sent[0]


# -- what the page and the API show ----------------------------------------------------------


def test_page_and_api_show_window_last_and_next_check(
    ca: FakeCA, role_users: dict[str, Any], api_client_for: Callable[..., Any]
) -> None:
    cert = _acme_certificate(ca)
    now = timezone.now()
    start, end = now + timedelta(days=30), now + timedelta(days=32)
    ca.renewal_window(_iso(start), _iso(end), retry_after="7200")
    _step(cert)
    cert.refresh_from_db()
    assert cert.ari_checked_at is not None and cert.ari_next_check is not None

    client = Client()
    client.force_login(role_users["viewer"])
    page = client.get(reverse("web:certificate-detail", args=["ari"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "CA renewal window (ARI)" in html
    assert start.strftime("%Y-%m-%d %H:%M") in html and end.strftime("%Y-%m-%d %H:%M") in html
    assert "ARI last checked" in html and cert.ari_checked_at.strftime("%Y-%m-%d %H:%M") in html
    assert "ARI next check" in html and cert.ari_next_check.strftime("%Y-%m-%d %H:%M") in html

    api = api_client_for(role_users["viewer"])
    body = api.get("/api/v1/certificates/ari/").json()
    info = body["status"]["renewalInfo"]
    assert parse_datetime(info["windowStart"]) == start
    assert parse_datetime(info["windowEnd"]) == end
    assert parse_datetime(info["lastChecked"]) == cert.ari_checked_at
    assert parse_datetime(info["nextCheck"]) == cert.ari_next_check
    assert parse_datetime(info["selectedTime"]) == cert.renewal_time
