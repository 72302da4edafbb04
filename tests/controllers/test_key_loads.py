"""Private keys: each decrypted and parsed at most once per reconcile pass, stored keys loaded
without repeating OpenSSL's RSA check, keys from outside checked in full when they enter.

The real worker runs the passes (selfSigned and CA issuers); tests/keyloads.py counts every
decryption and parse of a private key and labels it with its pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import Certificate, Event, Issuer, Secret
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.encryption import encrypt_text
from issuance.pki.keys import (
    InvalidPrivateKey,
    PassKeys,
    StoredKey,
    generate_private_key,
    load_stored_private_key,
    private_key_to_pem,
    validate_private_key,
)
from issuance.pki.signing import sign_csr
from issuance.shapes import PrivateKeySpec
from issuance.specs import SpecError, apply_issuer
from issuance.worker.loop import Worker
from tests.controllers.helpers import (
    approve_latest,
    deny_latest,
    manual_issuer,
    move_failure_back,
    requests_of,
)
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.keyloads import KeyLoads, key_id

pytestmark = pytest.mark.django_db


def drain() -> int:
    return Worker(threads=1).run_once()


def rsa_ca() -> tuple[str, str]:
    """A CA certificate and its RSA 2048 key (PEM), as an operator would paste them."""
    key = generate_private_key({"algorithm": "RSA", "size": 2048})
    csr = build_csr(key, {"commonName": "Outside CA"})
    cert = sign_csr(csr, key, None, duration=timedelta(days=30), now=timezone.now(), is_ca=True)
    return cert, private_key_to_pem(key, "PKCS8")


def inconsistent_rsa_pem() -> str:
    """An RSA key whose CRT exponent disagrees with d: parseable, but OpenSSL's check fails
    (signing with such a key can leak its factors)."""
    good = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_numbers()
    bad = rsa.RSAPrivateNumbers(
        p=good.p,
        q=good.q,
        d=good.d,
        dmp1=good.dmp1 + 2,
        dmq1=good.dmq1,
        iqmp=good.iqmp,
        public_numbers=good.public_numbers,
    ).private_key(unsafe_skip_rsa_key_validation=True)
    return bad.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def assert_once_per_pass(loads: KeyLoads, *keys: bytes) -> None:
    assert loads.over_once() == {}
    assert loads.checked_in_passes() == [], "a stored key was loaded with the full RSA check"
    for key in keys:
        assert loads.passes_loading(key), "the key was never loaded in a pass: nothing counted"


# -- through the worker ------------------------------------------------------------------


def test_default_key_selfsigned_issuance_loads_each_key_once_per_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads = KeyLoads.watch(monkeypatch)
    issuer = make_selfsigned_issuer()
    cert = make_certificate("web", issuer)  # no privateKey: what a user gets
    assert drain() > 0
    cert.refresh_from_db()
    assert cert.condition_is("Ready"), cert.conditions
    pem = Secret.objects.get(name="web-tls").tls_key
    key = load_stored_private_key(pem)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048
    mine = key_id(pem)
    assert_once_per_pass(loads, mine)
    # The pass that generated the key made the request with it without reading it back.
    first = next(p for p in loads.passes if p.startswith(f"certificates:{cert.pk}:"))
    assert first not in loads.passes_loading(mine)
    # The request's pass (selfSigned signs with it) and the pass that stored the result.
    assert any(p.startswith("certificaterequests:") for p in loads.passes_loading(mine))
    assert any(p.startswith("certificates:") for p in loads.passes_loading(mine))


def test_renewal_with_rotation_never_reuses_the_key_loading_it_once_per_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate(
        "keep", issuer, privateKey={"algorithm": "RSA", "size": 2048, "rotationPolicy": "Never"}
    )
    drain()
    cert.refresh_from_db()
    assert cert.revision == 1
    before = key_id(Secret.objects.get(name="keep-tls").tls_key)
    loads = KeyLoads.watch(monkeypatch)
    actions.force_renew(cert, "alice")
    assert drain() > 0
    cert.refresh_from_db()
    assert cert.revision == 2, cert.conditions
    assert key_id(Secret.objects.get(name="keep-tls").tls_key) == before
    assert Event.objects.filter(certificate_name="keep", reason="Reused").exists()
    assert_once_per_pass(loads, before)


def test_ca_issuer_key_from_outside_is_checked_once_on_entry_then_loaded_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads = KeyLoads.watch(monkeypatch)
    ca_pem, ca_key_pem = rsa_ca()
    apply_issuer("outside", {"ca": {"certificate": ca_pem, "privateKey": ca_key_pem}}, actor="t")
    ca_key = key_id(ca_key_pem)
    # Entry: the full check, outside any pass, exactly once.
    entry = [p for p in loads.parses if p.key == ca_key and p.pass_label is None]
    assert [p.checked for p in entry] == [True]

    cert = make_certificate("svc", Issuer.objects.get(name="outside"))
    assert drain() > 0
    cert.refresh_from_db()
    assert cert.condition_is("Ready"), cert.conditions
    cert_key = key_id(Secret.objects.get(name="svc-tls").tls_key)
    assert_once_per_pass(loads, ca_key, cert_key)
    # The CA key is read by the issuer's pass (readiness) and by the request's (signing).
    assert any(p.startswith("issuers:") for p in loads.passes_loading(ca_key))
    assert any(p.startswith("certificaterequests:") for p in loads.passes_loading(ca_key))
    # After entry, it was never checked in full again.
    assert [p for p in loads.parses if p.key == ca_key and p.checked] == entry


def test_the_next_key_is_generated_once_per_revision_and_kept_across_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from issuance.controllers import issuing
    from issuance.pki import keys

    made: list[str] = []
    real = keys.generate_private_key

    def counted(spec: PrivateKeySpec | None) -> CertificateIssuerPrivateKeyTypes:
        made.append(str(spec))
        return real(spec)

    monkeypatch.setattr(issuing, "generate_private_key", counted)
    loads = KeyLoads.watch(monkeypatch)
    cert = make_certificate("retry", manual_issuer())  # the default key, RSA 2048
    drain()
    deny_latest(cert)
    drain()
    move_failure_back(cert, timedelta(hours=1, minutes=1))
    drain()
    approve_latest(cert)
    drain()
    cert.refresh_from_db()
    assert cert.condition_is("Ready"), cert.conditions
    assert [r.revision for r in requests_of(cert)] == [1, 2]
    assert len(made) == 1  # one key for the failed request and its retry
    assert_once_per_pass(loads, key_id(Secret.objects.get(name="retry-tls").tls_key))


# -- the entry door ----------------------------------------------------------------------


def test_inconsistent_rsa_key_in_an_issuer_spec_is_refused_naming_the_field() -> None:
    ca_pem, _ = rsa_ca()
    with pytest.raises(SpecError) as caught:
        apply_issuer(
            "bad", {"ca": {"certificate": ca_pem, "privateKey": inconsistent_rsa_pem()}}, actor="t"
        )
    errors = caught.value.as_dict()
    assert list(errors) == ["spec.ca.privateKey"]
    assert "inconsistent RSA private key" in errors["spec.ca.privateKey"][0]
    assert not Issuer.objects.filter(name="bad").exists()
    assert not Secret.objects.filter(name="bad-ca").exists()


def test_api_checks_a_key_from_outside_once_and_refuses_an_inconsistent_one(
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads = KeyLoads.watch(monkeypatch)
    client = api_client_for(role_users["admin"])
    ca_pem, ca_key_pem = rsa_ca()
    good = client.post(
        "/api/v1/issuers/",
        {"name": "good", "spec": {"ca": {"certificate": ca_pem, "privateKey": ca_key_pem}}},
        format="json",
    )
    assert good.status_code == 201, good.content
    assert [p.checked for p in loads.parses if p.key == key_id(ca_key_pem)] == [True]
    response = client.post(
        "/api/v1/issuers/",
        {
            "name": "bad",
            "spec": {"ca": {"certificate": ca_pem, "privateKey": inconsistent_rsa_pem()}},
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert "spec.ca.privateKey" in str(body)
    assert "inconsistent RSA private key" in str(body)
    assert "PRIVATE KEY" not in str(body)  # the key is never echoed back
    assert not Secret.objects.filter(name="bad-ca").exists()


def test_apply_f_checks_a_manifest_key_once_and_names_the_document_and_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loads = KeyLoads.watch(monkeypatch)
    ca_pem, ca_key_pem = rsa_ca()
    manifest = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "manifest-ca"},
        "spec": {"ca": {"certificate": ca_pem, "privateKey": ca_key_pem}},
    }
    path = tmp_path / "issuer.yaml"
    path.write_text(yaml.safe_dump(manifest))
    call_command("apply", "-f", str(path), stdout=StringIO(), stderr=StringIO())
    assert Secret.objects.filter(name="manifest-ca-ca").exists()
    # Validated before anything is applied, and applied from that validation: one check.
    assert [p.checked for p in loads.parses if p.key == key_id(ca_key_pem)] == [True]

    manifest["metadata"] = {"name": "manifest-bad"}
    manifest["spec"] = {"ca": {"certificate": ca_pem, "privateKey": inconsistent_rsa_pem()}}
    path.write_text(yaml.safe_dump(manifest))
    with pytest.raises(CommandError) as caught:
        call_command("apply", "-f", str(path), stdout=StringIO(), stderr=StringIO())
    assert "document 1 (Issuer/manifest-bad): spec.ca.privateKey: is an inconsistent RSA" in str(
        caught.value
    )
    assert not Issuer.objects.filter(name="manifest-bad").exists()


def test_validate_private_key_names_the_field_for_what_is_not_a_key() -> None:
    with pytest.raises(InvalidPrivateKey) as caught:
        validate_private_key(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "f.g"
        )
    assert caught.value.field == "f.g"
    assert "unencrypted PEM RSA, ECDSA or Ed25519" in caught.value.reason
    assert str(caught.value).startswith("f.g: ")


def test_the_stored_door_does_not_check_and_the_entry_door_does() -> None:
    pem = inconsistent_rsa_pem()
    # What the stored door trusts (authenticated ciphertext) it does not check again...
    assert isinstance(load_stored_private_key(pem), rsa.RSAPrivateKey)
    # ...which is why nothing from outside may be stored without the entry door.
    with pytest.raises(InvalidPrivateKey):
        validate_private_key(pem, "spec.ca.privateKey")


# -- the per-pass cache ------------------------------------------------------------------


def test_pass_keys_decrypt_and_parse_each_ciphertext_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = KeyLoads.watch(monkeypatch)
    pem = private_key_to_pem(generate_private_key({"algorithm": "ECDSA", "size": 256}))
    ciphertext = encrypt_text(pem)
    keys = PassKeys()
    first = keys.get(ciphertext)
    assert first is not None and first.key is not None
    assert keys.get(ciphertext) is first
    assert len(loads.parses) == 1
    assert len(loads.decryptions) == 1
    assert keys.get("") is None
    assert keys.get("not a fernet token") is None  # undecryptable: as if there were none
    assert pem not in repr(first) and pem not in repr(keys)


def test_stored_key_that_does_not_parse_is_unreadable_not_an_error() -> None:
    stored = StoredKey.of("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    assert stored.key is None
    assert stored.public_der == b""


def test_certificate_with_unreadable_secret_key_is_reissued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("broken", issuer, privateKey={"algorithm": "ECDSA", "size": 256})
    drain()
    secret = Secret.objects.get(name="broken-tls")
    secret.tls_key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    secret.save()
    Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now())
    loads = KeyLoads.watch(monkeypatch)
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2
    assert cert.condition_is("Ready"), cert.conditions
    assert Event.objects.filter(
        certificate_name="broken", reason="Issuing", message__contains="tls.key cannot be read"
    ).exists()
    assert_once_per_pass(loads, key_id(Secret.objects.get(name="broken-tls").tls_key))
