"""ACME issuance with the default key (RSA 2048) through Pebble and the real worker: the
certificate key and the account key are each decrypted and parsed at most once per
reconcile pass, and never with OpenSSL's full RSA check (tests/keyloads.py counts)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from issuance.models import Certificate, Issuer, Secret
from issuance.pki.encryption import decrypt_text
from issuance.pki.keys import load_stored_private_key
from tests.e2e.conftest import AcmeStack, Drive
from tests.factories import make_certificate
from tests.keyloads import KeyLoads, key_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_default_key_acme_issuance_loads_each_key_once_per_pass(
    acme_stack: Callable[..., AcmeStack], drive: Drive, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = KeyLoads.watch(monkeypatch)
    stack = acme_stack()
    issuer = stack.make_issuer()
    drive(lambda: Issuer.objects.get(pk=issuer.pk).is_ready, timeout=30)
    make_certificate("web", issuer, dnsNames=["web.example.test"])  # no privateKey
    drive(lambda: Certificate.objects.get(name="web").condition_is("Ready"), timeout=90)

    pem = Secret.objects.get(name="web-tls").tls_key
    key = load_stored_private_key(pem)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    issuer.refresh_from_db()
    account = key_id(decrypt_text(issuer.acme_account_key_ciphertext))
    mine = key_id(pem)

    assert loads.over_once() == {}
    assert loads.checked_in_passes() == []
    assert any(p.startswith("issuers:") for p in loads.passes_loading(account))
    assert any(p.startswith("certificates:") for p in loads.passes_loading(mine))
    # The ACME flow never needs the certificate key outside the Certificate's own passes.
    assert all(p.startswith("certificates:") for p in loads.passes_loading(mine))
