"""Issuers' ACME accounts: configuration from the spec, the key (made once, stored
encrypted before any registration), registration, and one client per account."""

from __future__ import annotations

import threading

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.db import transaction

from issuance.acme.issuer_waits import no_account
from issuance.acme.protocol.account import (
    AccountConfig,
    AccountConfigError,
    generate_account_key,
    load_account_key,
    register,
)
from issuance.acme.protocol.client import AcmeClient, probe, tls_options
from issuance.acme.record import DATABASE_RECORD
from issuance.models import Issuer
from issuance.pki.encryption import DecryptionError, decrypt_text, encrypt_text
from issuance.pki.keys import InvalidPrivateKey, validate_private_key
from issuance.shapes import ExternalAccountBinding
from issuance.specs.secret_refs import SecretRefError, read_secret_value


def account_config(issuer: Issuer) -> AccountConfig:
    spec = issuer.acme_spec
    server = str(spec.get("server") or "").strip()
    if not server:
        raise AccountConfigError("spec.acme.server is required")
    eab = spec.get("externalAccountBinding") or {}
    key_id = str(eab.get("keyID") or "") if isinstance(eab, dict) else ""
    hmac_key = _eab_hmac_key(eab) if key_id else ""
    algorithm = str(eab.get("keyAlgorithm") or "HS256") if isinstance(eab, dict) else "HS256"
    return AccountConfig(
        server=server,
        email=str(spec.get("email") or ""),
        eab_key_id=key_id,
        eab_hmac_key=hmac_key,
        eab_algorithm=algorithm,
    )


def _eab_hmac_key(eab: ExternalAccountBinding) -> str:
    """The EAB HMAC key from the referenced Secret (specs move an inline hmacKey there)."""
    ref = eab.get("keySecretRef")
    if isinstance(ref, dict) and ref.get("name"):
        name = str(ref["name"])
        try:
            value = read_secret_value(name, str(ref.get("key") or "") or None).strip()
        except SecretRefError as exc:
            raise AccountConfigError(
                f"spec.acme.externalAccountBinding.keySecretRef: {exc}"
            ) from None
        if not value:
            raise AccountConfigError(
                f"spec.acme.externalAccountBinding.keySecretRef: secret {name!r} holds no key"
            )
        return value
    inline = str(eab.get("hmacKey") or "").strip()
    if inline:
        return inline
    raise AccountConfigError(
        "spec.acme.externalAccountBinding needs keySecretRef (or hmacKey) with keyID"
    )


def ensure_account_key(issuer: Issuer) -> bool:
    """Make the account key once, stored before any registration. Returns True if made.

    With `disableAccountKeyGeneration` the key is never made: it is read from
    `privateKeySecretRef` (cert-manager's `tls.key` unless the ref names a key), and an
    AccountConfigError names the Secret while it is missing or holds no usable key."""
    if issuer.acme_spec.get("disableAccountKeyGeneration"):
        _use_account_key_from_secret(issuer)
        return False
    if issuer.acme_account_key_ciphertext:
        return False
    with transaction.atomic():
        locked = Issuer.objects.select_for_update().get(pk=issuer.pk)
        if locked.acme_account_key_ciphertext:
            issuer.acme_account_key_ciphertext = locked.acme_account_key_ciphertext
            return False
        issuer.acme_account_key_ciphertext = encrypt_text(generate_account_key())
        Issuer.objects.filter(pk=issuer.pk).update(
            acme_account_key_ciphertext=issuer.acme_account_key_ciphertext
        )
    return True


def _use_account_key_from_secret(issuer: Issuer) -> None:
    ref = issuer.acme_spec.get("privateKeySecretRef")
    name = ref["name"] if ref else ""
    key_name = (ref.get("key") if ref else None) or "tls.key"  # cert-manager's key
    where = "spec.acme.privateKeySecretRef"
    no_generation = "disableAccountKeyGeneration is true, so no key is generated"
    try:
        pem = read_secret_value(name, key_name).strip()
    except SecretRefError as exc:
        raise AccountConfigError(f"{where}: {exc} ({no_generation})") from None
    try:
        key = validate_private_key(pem, where)
    except InvalidPrivateKey as exc:
        raise AccountConfigError(f"{exc} (secret {name!r})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise AccountConfigError(f"{where}: the account key must be ECDSA or RSA")
    if issuer.acme_account_key_ciphertext:
        try:
            if decrypt_text(issuer.acme_account_key_ciphertext).strip() == pem:
                return
        except DecryptionError:
            pass
    # A new key is a new account: registered again (register() finds an existing one).
    issuer.acme_account_key_ciphertext = encrypt_text(pem)
    issuer.acme_account_uri = ""
    Issuer.objects.filter(pk=issuer.pk).update(
        acme_account_key_ciphertext=issuer.acme_account_key_ciphertext, acme_account_uri=""
    )


def register_account(issuer: Issuer, config: AccountConfig) -> str:
    """Register (or find) the issuer's account for its stored key; the account URI."""
    client = AcmeClient(
        config.server,
        load_account_key(issuer.acme_account_key_ciphertext),
        "",
        tls_options(issuer.acme_spec),
        DATABASE_RECORD,
    )
    known = bool(issuer.acme_account_uri) and (
        issuer.acme_account_fingerprint == config.fingerprint()
    )
    return register(client, config, known=known)


def probe_server(issuer: Issuer, server: str) -> None:
    """GET the CA's directory if it is this caller's turn to probe it (health.py)."""
    probe(server, tls_options(issuer.acme_spec), DATABASE_RECORD)


_clients_lock = threading.Lock()
_clients: dict[tuple[int, int, str, str], AcmeClient] = {}


def client_for(issuer: Issuer) -> AcmeClient:
    """The client for an ACME issuer's registered account (cached per issuer generation)."""
    if not issuer.acme_account_uri or not issuer.acme_account_key_ciphertext:
        # Parked until the issuer controller registers it (issuer_waits.py), not retried.
        raise no_account(issuer)
    spec = issuer.acme_spec
    cache_key = (issuer.pk, issuer.generation, issuer.acme_account_uri, str(spec.get("server")))
    with _clients_lock:
        client = _clients.get(cache_key)
    if client is not None:
        return client
    client = AcmeClient(
        str(spec.get("server") or ""),
        load_account_key(issuer.acme_account_key_ciphertext),
        issuer.acme_account_uri,
        tls_options(spec),
        DATABASE_RECORD,
    )
    with _clients_lock:
        # Drop clients for older generations of the same issuer.
        for key in [k for k in _clients if k[0] == issuer.pk]:
            del _clients[key]
        _clients[cache_key] = client
    return client


def forget_clients() -> None:
    with _clients_lock:
        _clients.clear()
