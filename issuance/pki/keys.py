"""Private keys: generate per the Certificate's privateKey spec, load, describe, match.

Two doors for loading a PEM private key:

- `validate_private_key(pem, field)`: a key from outside (the inline `ca.privateKey` of an
  issuer spec, from the API or an `apply -f` manifest; any future upload). OpenSSL's full
  check runs once, when the key enters; an invalid key is refused naming the field.
- `load_stored_private_key(pem)`: a key from our own encrypted columns. Every such key was
  generated here or came in through the first door, so the check is not repeated.

`PassKeys` decrypts and parses each stored key at most once per reconcile pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    CertificatePublicKeyTypes,
    PrivateKeyTypes,
)

from issuance.pki.encryption import DecryptionError, decrypt_text
from issuance.shapes import PrivateKeySpec

DEFAULT_RSA_SIZE = 2048
DEFAULT_ECDSA_SIZE = 256
RSA_SIZES = (2048, 3072, 4096, 8192)
ECDSA_CURVES: dict[int, ec.EllipticCurve] = {
    256: ec.SECP256R1(),
    384: ec.SECP384R1(),
    521: ec.SECP521R1(),
}


class KeyError_(ValueError):
    pass


class InvalidPrivateKey(KeyError_):
    """A private key from outside was refused; the message names the field it came in."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def normalize_key_spec(spec: PrivateKeySpec | None) -> tuple[str, int]:
    """(algorithm, size) with cert-manager's defaults: RSA 2048, ECDSA P-256."""
    spec = spec or {}
    algorithm = str(spec.get("algorithm") or "RSA")
    size = spec.get("size")
    if algorithm == "RSA":
        return algorithm, int(size or DEFAULT_RSA_SIZE)
    if algorithm == "ECDSA":
        return algorithm, int(size or DEFAULT_ECDSA_SIZE)
    if algorithm == "Ed25519":
        return algorithm, 0
    raise KeyError_(f"unsupported privateKey.algorithm {algorithm!r} (RSA, ECDSA, Ed25519)")


def generate_private_key(spec: PrivateKeySpec | None) -> CertificateIssuerPrivateKeyTypes:
    algorithm, size = normalize_key_spec(spec)
    if algorithm == "RSA":
        if size not in RSA_SIZES:
            raise KeyError_(f"privateKey.size {size} is not supported for RSA {RSA_SIZES}")
        return rsa.generate_private_key(public_exponent=65537, key_size=size)
    if algorithm == "ECDSA":
        if size not in ECDSA_CURVES:
            raise KeyError_(f"privateKey.size {size} is not supported for ECDSA (256, 384, 521)")
        return ec.generate_private_key(ECDSA_CURVES[size])
    return ed25519.Ed25519PrivateKey.generate()


def private_key_to_pem(key: PrivateKeyTypes, encoding: str = "PKCS1") -> str:
    fmt = serialization.PrivateFormat.PKCS8
    if (encoding == "PKCS1" and isinstance(key, rsa.RSAPrivateKey)) or (
        encoding == "PKCS1" and isinstance(key, ec.EllipticCurvePrivateKey)
    ):
        fmt = serialization.PrivateFormat.TraditionalOpenSSL
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


def _parse(pem: str, *, check: bool) -> CertificateIssuerPrivateKeyTypes:
    key = serialization.load_pem_private_key(
        pem.encode(), password=None, unsafe_skip_rsa_key_validation=not check
    )
    if not isinstance(
        key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)
    ):
        raise KeyError_("unsupported private key type")
    return key


def validate_private_key(pem: str, field: str) -> CertificateIssuerPrivateKeyTypes:
    """A private key from outside, checked in full (for RSA: OpenSSL's consistency check of
    the key's numbers, ~33 ms of CPU for 2048 bits). Call it once, where the key enters;
    store the key only if this passes. Raises InvalidPrivateKey naming `field`."""
    try:
        return _parse(pem, check=True)
    except KeyError_ as exc:
        raise InvalidPrivateKey(field, f"{exc} (RSA, ECDSA or Ed25519 expected)") from None
    except (ValueError, TypeError):
        pass
    # Refused: say whether it is not a key at all or an RSA key whose numbers disagree
    # (a key that may leak its factors through faulty signatures). The error path only.
    try:
        _parse(pem, check=False)
    except (ValueError, TypeError):
        raise InvalidPrivateKey(
            field, "must be an unencrypted PEM RSA, ECDSA or Ed25519 private key"
        ) from None
    raise InvalidPrivateKey(
        field,
        "is an inconsistent RSA private key (its numbers do not agree: OpenSSL's key check "
        "failed); it cannot be used",
    )


def load_stored_private_key(pem: str) -> CertificateIssuerPrivateKeyTypes:
    """A private key read back from our own encrypted storage, without repeating OpenSSL's
    RSA consistency check (`unsafe_skip_rsa_key_validation=True`).

    Safe because of where such a key comes from and how it is kept: it was generated here
    (valid when made) or passed `validate_private_key` when it entered, and it is stored
    Fernet-encrypted; Fernet authenticates the ciphertext (HMAC-SHA256 under
    KEY_ENCRYPTION_KEY), so a stored key cannot have been altered since. Repeating the check
    would cost ~33 ms of CPU per RSA 2048 load and find nothing new. Never call this on PEM
    from outside the database: use `validate_private_key`.
    """
    return _parse(pem, check=False)


@dataclass(frozen=True)
class StoredKey:
    """A stored private key as one reconcile pass sees it: PEM, parsed key, public key."""

    pem: str
    key: CertificateIssuerPrivateKeyTypes | None  # None: the PEM cannot be parsed
    public_der: bytes = b""  # SubjectPublicKeyInfo DER; b"" when unparsable

    @classmethod
    def of(cls, pem: str, key: CertificateIssuerPrivateKeyTypes | None = None) -> StoredKey:
        """From the PEM (parsed here, the fast way) or from a key already in hand."""
        if key is None:
            try:
                key = load_stored_private_key(pem)
            except (ValueError, TypeError):
                return cls(pem, None)
        return cls(pem, key, public_key_bytes(key.public_key()))

    def __repr__(self) -> str:  # never the key itself
        return f"StoredKey({'readable' if self.key is not None else 'unreadable'})"


class PassKeys:
    """The stored private keys of one reconcile pass, each decrypted and parsed at most once.

    Made at the start of a pass and dropped with it: a decrypted key stays in memory no
    longer than the pass that needs it. Keyed by ciphertext, so a key stored anew during the
    pass (another ciphertext) is read afresh.
    """

    def __init__(self) -> None:
        self._seen: dict[str, StoredKey | None] = {}

    def __repr__(self) -> str:
        return f"PassKeys({len(self._seen)} keys)"

    def get(self, ciphertext: str) -> StoredKey | None:
        """The key stored as `ciphertext`; None when there is none or it cannot be
        decrypted (wrong or rotated KEY_ENCRYPTION_KEY)."""
        if not ciphertext:
            return None
        if ciphertext not in self._seen:
            try:
                self._seen[ciphertext] = StoredKey.of(decrypt_text(ciphertext))
            except DecryptionError:
                self._seen[ciphertext] = None
        return self._seen[ciphertext]

    def remember(self, ciphertext: str, key: StoredKey) -> None:
        """A key this pass just stored as `ciphertext` (so it is not decrypted back)."""
        if ciphertext:
            self._seen[ciphertext] = key


def describe_public_key(key: CertificatePublicKeyTypes) -> tuple[str, int]:
    """(algorithm, size) of a public key, in cert-manager's words."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "ECDSA", key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519", 0
    return type(key).__name__, 0


def public_key_bytes(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def key_matches_spec(key: PrivateKeyTypes, spec: PrivateKeySpec | None) -> bool:
    algorithm, size = normalize_key_spec(spec)
    have = describe_public_key(key.public_key())  # type: ignore[arg-type]
    return have == (algorithm, size)
