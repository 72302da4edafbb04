"""A certificate signed for less than its `duration` says so (issue 28, item 5): on the
CertificateRequest, on the Certificate's status and page, and in the timeline."""

from __future__ import annotations

from datetime import timedelta
from html import escape

import pytest
from cryptography import x509
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from issuance.acme.issuer import _shortened_by_server
from issuance.models import Certificate, CertificateRequest, Event, Secret
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.pki.x509 import split_pem_chain
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer
from tests.helpers import drain

pytestmark = pytest.mark.django_db


def _lifetime(cert: Certificate) -> timedelta:
    leaf = x509.load_pem_x509_certificate(
        split_pem_chain(Secret.objects.get(name=cert.secret_name).tls_crt)[0].encode()
    )
    return leaf.not_valid_after_utc - leaf.not_valid_before_utc


def _capped_events(name: str) -> list[str]:
    return list(
        Event.objects.filter(certificate_name=name, reason="DurationCapped").values_list(
            "message", flat=True
        )
    )


def test_max_duration_cap_is_reported_everywhere(role_users: dict[str, User]) -> None:
    issuer = make_ca_issuer(maxDuration="720h")
    cert = make_certificate("capped", issuer, duration="2160h")
    drain()
    cert.refresh_from_db()
    assert cert.condition_is("Ready"), cert.conditions
    assert _lifetime(cert) == timedelta(hours=720, minutes=5)  # 5 min backdate
    expected = (
        "Signed for 30 days instead of the requested 90 days: the issuer's maxDuration is 30 days"
    )
    request = CertificateRequest.objects.get(certificate=cert)
    capped = request.get_condition("DurationCapped")
    assert capped is not None and capped["status"] == "True"
    assert capped["message"] == expected
    ready = request.get_condition("Ready")
    assert ready is not None and expected in ready["message"]
    on_cert = cert.get_condition("DurationCapped")
    assert on_cert is not None and on_cert["message"] == expected
    assert _capped_events("capped") == [expected]
    client = Client()
    client.force_login(role_users["viewer"])
    page = client.get(f"/certificates/{cert.name}/")
    assert page.status_code == 200
    assert escape(expected) in page.content.decode()


def test_within_the_cap_nothing_is_said_and_a_later_revision_clears_it() -> None:
    issuer = make_ca_issuer(maxDuration="720h")
    cert = make_certificate("fits", issuer, duration="2160h")
    drain()
    cert.refresh_from_db()
    assert cert.get_condition("DurationCapped") is not None
    cert.spec = {**cert.spec, "duration": "240h"}
    cert.save(update_fields=["spec"])
    actions.force_renew(cert, "tester")
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2, cert.conditions
    assert _lifetime(cert) == timedelta(hours=240, minutes=5)
    assert cert.get_condition("DurationCapped") is None
    second = CertificateRequest.objects.get(certificate=cert, revision=2)
    assert second.get_condition("DurationCapped") is None
    assert len(_capped_events("fits")) == 1  # only the first revision's


def test_the_ca_certificate_expiring_first_is_named() -> None:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    ca_pem = sign_csr(
        build_csr(key, {"commonName": "Short CA"}),
        key,
        None,
        duration=timedelta(days=10),
        now=timezone.now(),
        is_ca=True,
    )
    secret = Secret(name="short-ca", tls_crt=ca_pem, ca_crt=ca_pem)
    secret.tls_key = private_key_to_pem(key)
    secret.save()
    issuer = make_ca_issuer(name="short", secret_name="short-ca")
    cert = make_certificate("outlived", issuer, duration="720h")
    drain()
    cert.refresh_from_db()
    capped = cert.get_condition("DurationCapped")
    assert capped is not None, cert.conditions
    assert capped["message"].startswith("Signed for 9 days 23 hours")
    assert "instead of the requested 30 days: the CA certificate expires at" in capped["message"]
    assert "cannot outlive its CA" in capped["message"]


def test_the_default_cap_is_named_when_the_issuer_sets_none() -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("long", issuer, duration="17520h")
    drain()
    cert.refresh_from_db()
    capped = cert.get_condition("DurationCapped")
    assert capped is not None, cert.conditions
    assert capped["message"] == (
        "Signed for 365 days instead of the requested 730 days: DEFAULT_MAX_SIGNING_DURATION "
        "is 365 days and the issuer sets no maxDuration"
    )


def _leaf_lasting(days: int) -> str:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    return sign_csr(
        build_csr(key, {"commonName": "acme.example.test"}),
        key,
        None,
        duration=timedelta(days=days),
        now=timezone.now(),
    )


def test_an_acme_server_choosing_a_shorter_life_is_reported() -> None:
    asked_a_year = CertificateRequest(spec={"duration": "8760h"})
    note = _shortened_by_server(asked_a_year, _leaf_lasting(90))
    assert note.startswith("Signed for 89 days 23 hours")
    assert "instead of the requested 365 days: the ACME server decides" in note
    # No duration asked, or the server gave what was asked: nothing to say.
    assert _shortened_by_server(CertificateRequest(spec={}), _leaf_lasting(1)) == ""
    asked_ninety = CertificateRequest(spec={"duration": "2160h"})
    assert _shortened_by_server(asked_ninety, _leaf_lasting(90)) == ""
