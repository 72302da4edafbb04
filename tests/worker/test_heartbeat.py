"""The lease heartbeat: renews only what this worker holds, gives back what it stranded."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from issuance.models import Certificate
from issuance.worker.heartbeat import Heartbeat
from issuance.worker.outage import SETTLE, DatabaseOutage
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def leased(name: str, owner: str, seconds: float) -> Certificate:
    cert = make_certificate(name, make_selfsigned_issuer(name=f"{name}-issuer"))
    Certificate.objects.filter(pk=cert.pk).update(
        lease_owner=owner, lease_until=timezone.now() + timedelta(seconds=seconds)
    )
    cert.refresh_from_db()
    return cert


def test_a_beat_renews_the_held_rows_of_its_owner_only() -> None:
    mine = leased("mine", "w1", 2)
    not_held = leased("not-held", "w1", 2)
    theirs = leased("theirs", "w2", 2)
    beat = Heartbeat("w1", settings.WORKER_LEASE, DatabaseOutage())
    beat.hold(Certificate, mine.pk)
    beat.hold(Certificate, theirs.pk)  # someone took it over meanwhile: not ours to renew

    assert beat.beat()

    def until(cert: Certificate) -> timedelta:
        cert.refresh_from_db()
        assert cert.lease_until is not None
        return cert.lease_until - timezone.now()

    assert until(mine) > settings.WORKER_LEASE - timedelta(seconds=2)
    assert until(not_held) < timedelta(seconds=3)
    assert until(theirs) < timedelta(seconds=3)
    assert Certificate.objects.get(pk=theirs.pk).lease_owner == "w2"


def test_dropped_rows_are_not_renewed_and_a_double_hold_needs_two_drops() -> None:
    cert = leased("twice", "w1", 2)
    beat = Heartbeat("w1", settings.WORKER_LEASE, DatabaseOutage())
    beat.hold(Certificate, cert.pk)
    beat.hold(Certificate, cert.pk)  # released and claimed again before the first drop
    beat.drop(Certificate, cert.pk)
    assert beat.held() == [(Certificate, cert.pk)]
    beat.drop(Certificate, cert.pk)
    assert beat.held() == []


def test_a_stranded_row_is_given_back_due_at_once() -> None:
    cert = leased("stranded", "w1", 15)
    due_at = Certificate.objects.get(pk=cert.pk).due_at
    beat = Heartbeat("w1", settings.WORKER_LEASE, DatabaseOutage())
    beat.hold(Certificate, cert.pk)
    beat.strand(Certificate, cert.pk)

    assert beat.beat()

    cert.refresh_from_db()
    assert cert.lease_owner == "" and cert.lease_until is None
    assert cert.due_at == due_at and due_at is not None and due_at <= timezone.now()
    assert beat.stranded() == [] and beat.held() == []


def test_the_interval_is_a_quarter_of_the_lease() -> None:
    beat = Heartbeat("w1", settings.WORKER_LEASE, DatabaseOutage())
    # Three beats may be missed (a stalled thread, a short outage) before the lease runs out.
    assert beat.interval * 4 == settings.WORKER_LEASE.total_seconds()


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    outage = DatabaseOutage()
    with caplog.at_level(logging.INFO, logger="issuance.worker"):
        for _ in range(5):
            outage.failed(ConnectionError("connection refused\nsecond line"))
        assert outage.active
        # A success right after a failure (a backend not yet dead) does not end it...
        outage.ok()
        assert outage.active
        time.sleep(SETTLE + 0.1)
        for _ in range(3):  # ...one after a quiet moment does, once
            outage.ok()
        assert not outage.active
        outage.failed(ConnectionError("again"))
        time.sleep(SETTLE + 0.1)
        outage.ok()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines
    assert lines[0] == "database unavailable (ConnectionError: connection refused); waiting for it"
    assert lines[1].startswith("database available again after ")
    assert outage.outages == 2 and not outage.active


@pytest.mark.django_db(transaction=True)
def test_a_stop_right_after_a_refused_release_still_gives_the_row_back() -> None:
    """The thread's last act is a beat for what the database refused: a worker stopped a
    moment after an outage (SIGTERM once the work is done) loses nothing it still keeps."""
    for n in range(10):
        cert = leased(f"late-{n}", "w1", 15)
        beat = Heartbeat("w1", settings.WORKER_LEASE, DatabaseOutage())
        beat.start()
        beat.strand(Certificate, cert.pk)
        beat.stop()
        cert.refresh_from_db()
        assert (cert.lease_owner, beat.stranded()) == ("", []), n
