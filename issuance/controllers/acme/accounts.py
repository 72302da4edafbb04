"""Issuers' ACME accounts: configuration from the spec, the key (made once, stored
encrypted before any registration), registration, and one client per account."""

from __future__ import annotations

import threading
from datetime import timedelta

from django.db import transaction

from issuance.acme.account import (
    AccountConfig,
    AccountConfigError,
    generate_account_key,
    load_account_key,
    register,
)
from issuance.acme.client import AcmeClient, probe, tls_options
from issuance.controllers.acme.record import DATABASE_RECORD
from issuance.controllers.base import TemporaryError
from issuance.models import Issuer
from issuance.pki.encryption import encrypt_text
from issuance.shapes import ExternalAccountBinding
from issuance.specs.secrets import SecretRefError, read_secret_value


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
    """Make the account key once, stored before any registration. Returns True if made."""
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
        raise TemporaryError(
            f"Issuer {issuer.name} has no registered ACME account yet", delay=timedelta(seconds=5)
        )
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
