"""Issuer controller: Ready for selfSigned, CA key pair checks, generated CA, maxDuration."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.controllers import issuers
from issuance.models import Event, Issuer, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.shapes import Condition, PrivateKeySpec
from tests.factories import make_ca_issuer, make_ca_secret, make_selfsigned_issuer

pytestmark = pytest.mark.django_db
EC: PrivateKeySpec = {"algorithm": "ECDSA", "size": 256}


def ready(issuer: Issuer) -> Condition:
    issuer.refresh_from_db()
    cond = issuer.get_condition("Ready")
    assert cond is not None
    return cond


def test_selfsigned_ready_and_observed_generation() -> None:
    issuer = make_selfsigned_issuer()
    issuer.generation = 3
    issuer.save()
    assert issuers.reconcile(issuer).requeue_after is None
    cond = ready(issuer)
    assert cond["status"] == "True" and cond["reason"] == "IsReady"
    assert issuer.observed_generation == 3
    assert Event.objects.filter(kind="Issuer", name=issuer.name).count() == 1
    issuers.reconcile(issuer)  # no change, no second event
    assert Event.objects.filter(kind="Issuer", name=issuer.name).count() == 1


def test_invalid_max_duration() -> None:
    issuer = make_selfsigned_issuer(maxDuration="forever")
    issuers.reconcile(issuer)
    cond = ready(issuer)
    assert cond["status"] == "False" and cond["reason"] == "InvalidMaxDuration"
    assert "selfSigned.maxDuration" in cond["message"]


def test_ca_secret_not_a_ca() -> None:
    key = generate_private_key(EC)
    leaf = sign_csr(
        build_csr(key, {"commonName": "leaf"}),
        key,
        None,
        duration=timedelta(days=30),
        now=timezone.now(),
        is_ca=False,
    )
    secret = Secret(name="leaf-pair", tls_crt=leaf)
    secret.tls_key = private_key_to_pem(key)
    secret.save()
    issuer = make_ca_issuer(secret_name="leaf-pair")
    issuers.reconcile(issuer)
    cond = ready(issuer)
    assert cond["status"] == "False" and cond["reason"] == "ErrGetKeyPair"
    assert "not a CA certificate" in cond["message"]
    assert issuer.status_message == cond["message"]


def test_ca_key_does_not_match() -> None:
    secret = make_ca_secret("mismatch")
    secret.tls_key = private_key_to_pem(generate_private_key(EC))
    secret.save()
    issuer = make_ca_issuer(secret_name="mismatch")
    issuers.reconcile(issuer)
    cond = ready(issuer)
    assert cond["status"] == "False" and "does not match" in cond["message"]


def test_ca_becomes_ready_when_secret_appears() -> None:
    issuer = Issuer.objects.create(name="later", kind="ca", spec={"ca": {"secretName": "later"}})
    result = issuers.reconcile(issuer)
    assert ready(issuer)["status"] == "False"
    assert result.requeue_after == timedelta(minutes=1)
    make_ca_secret("later")
    issuers.reconcile(issuer)
    cond = ready(issuer)
    assert cond["status"] == "True" and cond["reason"] == "KeyPairVerified"
    assert issuer.status_message == ""


def test_generate_uses_common_name_and_never_overwrites() -> None:
    existing = make_ca_secret("keep-me", common_name="Existing CA")
    issuer = Issuer.objects.create(
        name="gen",
        kind="ca",
        spec={"ca": {"secretName": "keep-me", "generate": True, "commonName": "Other"}},
    )
    issuers.reconcile(issuer)
    assert Secret.objects.get(name="keep-me").tls_crt == existing.tls_crt
    assert ready(issuer)["status"] == "True"
    issuer2 = Issuer.objects.create(
        name="gen2",
        kind="ca",
        spec={"ca": {"secretName": "fresh", "generate": True, "commonName": "Fresh CA"}},
    )
    assert issuers.reconcile(issuer2).requeue_after == timedelta(0)
    from issuance.pki.x509 import cert_info

    info = cert_info(Secret.objects.get(name="fresh").tls_crt)
    assert info.common_name == "Fresh CA" and info.is_ca
    assert info.key_algorithm == "ECDSA"
    assert timedelta(days=3649) < info.not_after - info.not_before < timedelta(days=3651)
    assert Event.objects.filter(name="gen2", reason="KeyPairGenerated").exists()
