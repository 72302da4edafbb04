"""ARI (RFC 9773): the CA's suggested window lands on the Certificate for readiness."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils.dateparse import parse_datetime

from issuance.controllers.acme.accounts import ensure_account_key
from issuance.issuers.acme import _update_ari, ari_point
from issuance.models import CertificateRequest, Issuer
from tests.acme.fakeca import FakeCA, Reply
from tests.acme.pki import make_chain
from tests.factories import make_certificate

pytestmark = pytest.mark.django_db


def _request(ca: FakeCA) -> CertificateRequest:
    issuer = Issuer.objects.create(
        name="fake",
        kind="acme",
        spec={"acme": {"server": ca.directory_url, "solvers": [{"http01": {}}]}},
        acme_account_uri=f"{ca.base}/acct/1",
    )
    ensure_account_key(issuer)
    cert = make_certificate("ari", issuer)
    return CertificateRequest.objects.create(
        name="ari-1", issuer=issuer, certificate=cert, revision=1, spec={"request": ""}
    )


def _when(value: str) -> datetime:
    parsed = parse_datetime(value)
    assert parsed is not None
    return parsed


def test_window_is_recorded_inside_the_window(ca: FakeCA) -> None:
    start, end = "2031-03-01T00:00:00Z", "2031-03-03T00:00:00Z"
    ca.default["/ari"] = Reply(200, {"suggestedWindow": {"start": start, "end": end}})
    request = _request(ca)
    _update_ari(request, make_chain("ari.example.test", "I", "R"))
    assert request.certificate is not None
    request.certificate.refresh_from_db()
    when = request.certificate.ari_renewal_time
    assert when is not None
    assert _when(start) <= when <= _when(end)
    assert when == ari_point("ari", _when(start), _when(end))


def test_no_ari_clears_a_stale_window(ca: FakeCA) -> None:
    del ca.directory["renewalInfo"]
    request = _request(ca)
    assert request.certificate is not None
    type(request.certificate).objects.filter(pk=request.certificate.pk).update(
        ari_renewal_time=_when("2031-01-01T00:00:00Z")
    )
    request.certificate.refresh_from_db()
    _update_ari(request, make_chain("ari.example.test", "I", "R"))
    request.certificate.refresh_from_db()
    assert request.certificate.ari_renewal_time is None


def test_points_spread_across_the_window() -> None:
    start = _when("2031-01-01T00:00:00Z")
    end = start + timedelta(days=2)
    points = {ari_point(f"cert-{i}", start, end) for i in range(50)}
    assert len(points) == 50
    assert all(start <= p <= end for p in points)
    assert max(points) - min(points) > timedelta(days=1)
