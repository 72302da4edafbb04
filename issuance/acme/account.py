"""ACME account of an Issuer: the key (made once, stored encrypted) and its registration."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.db import transaction
from josepy.jwk import JWK, JWKEC, JWKRSA

from issuance.acme.errors import AcmeProblemError
from issuance.models import Issuer
from issuance.pki.encryption import decrypt_text, encrypt_text
from issuance.pki.keys import load_stored_private_key, private_key_to_pem


class AccountConfigError(Exception):
    """The issuer's spec cannot be used to register (e.g. the EAB key Secret is missing)."""


@dataclass(frozen=True)
class AccountConfig:
    server: str
    email: str
    eab_key_id: str
    eab_hmac_key: str  # base64url
    eab_algorithm: str = "HS256"

    def fingerprint(self) -> str:
        """What the account was registered for; a change means register again."""
        raw = json.dumps([self.server, self.email, self.eab_key_id]).encode()
        return hashlib.sha256(raw).hexdigest()


def account_config(issuer: Issuer) -> AccountConfig:
    spec = issuer.kind_spec
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


def _eab_hmac_key(eab: dict[str, Any]) -> str:
    """The EAB HMAC key from the referenced Secret (specs move an inline hmacKey there)."""
    from issuance.specs.secrets import SecretRefError, read_secret_value

    ref = eab.get("keySecretRef") or {}
    name = str(ref.get("name") or "") if isinstance(ref, dict) else ""
    if name:
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


def generate_account_key() -> str:
    """ECDSA P-256: small, fast JWS signatures (ES256), accepted by Let's Encrypt and Pebble."""
    return private_key_to_pem(ec.generate_private_key(ec.SECP256R1()), "PKCS8")


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


def load_account_key(issuer: Issuer) -> JWK:
    """The account key, decrypted and parsed (generated here by generate_account_key)."""
    key = load_stored_private_key(decrypt_text(issuer.acme_account_key_ciphertext))
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return JWKEC(key=key)
    if isinstance(key, rsa.RSAPrivateKey):
        return JWKRSA(key=key)
    raise AccountConfigError("the stored ACME account key is neither ECDSA nor RSA")


def register(issuer: Issuer, config: AccountConfig) -> str:
    """Register (or find) the account for the stored key; returns the account URI.

    With an account URI already stored for the same config, `onlyReturnExisting` checks it
    still exists without creating anything; otherwise newAccount (same key → same account,
    so a retry after a crash never makes a second one).
    """
    from issuance.acme.client import AcmeClient, tls_options

    client = AcmeClient(config.server, load_account_key(issuer), "", tls_options(issuer.kind_spec))
    if issuer.acme_account_uri and issuer.acme_account_fingerprint == config.fingerprint():
        try:
            return str(client.new_account(only_return_existing=True)["url"])
        except AcmeProblemError as exc:
            if exc.short_type != "accountDoesNotExist":
                raise
    eab = (
        (config.eab_key_id, config.eab_hmac_key, config.eab_algorithm)
        if config.eab_key_id
        else None
    )
    if eab is None and client.external_account_required:
        raise AccountConfigError(
            "the ACME server requires External Account Binding: set "
            "spec.acme.externalAccountBinding (keyID and key)"
        )
    return str(client.new_account(email=config.email, eab=eab)["url"])
