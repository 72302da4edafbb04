"""Private keys: generate per the Certificate's privateKey spec, load, describe, match."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    CertificatePublicKeyTypes,
    PrivateKeyTypes,
)

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


def normalize_key_spec(spec: dict[str, Any] | None) -> tuple[str, int]:
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


def generate_private_key(spec: dict[str, Any] | None) -> CertificateIssuerPrivateKeyTypes:
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


def load_private_key(pem: str) -> CertificateIssuerPrivateKeyTypes:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    if not isinstance(
        key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)
    ):
        raise KeyError_("unsupported private key type")
    return key


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


def key_matches_spec(key: PrivateKeyTypes, spec: dict[str, Any] | None) -> bool:
    algorithm, size = normalize_key_spec(spec)
    have = describe_public_key(key.public_key())  # type: ignore[arg-type]
    return have == (algorithm, size)
