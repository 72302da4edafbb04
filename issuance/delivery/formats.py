"""A stored key pair rendered as the files cert-manager writes into a Secret.

Always: `tls.crt` (leaf + chain, PEM), `tls.key`, `ca.crt`. With `additionalOutputFormats`:
CombinedPEM → `tls-combined.pem` (key, then the chain), DER → `key.der` (the key, PKCS#8,
as cert-manager) and `tls.der` (the leaf; our addition). With `keystores.pkcs12.create`:
`keystore.p12`, `truststore.p12`; with `keystores.jks.create`: `keystore.jks`,
`truststore.jks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jks
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from issuance.pki.keys import load_stored_private_key
from issuance.pki.x509 import split_pem_chain
from issuance.shapes import CertificateSpec

PEM_FILES = ("tls.crt", "tls.key", "ca.crt")
KEYSTORE_FILES = {
    "keystore.p12": "pkcs12",
    "truststore.p12": "pkcs12",
    "keystore.jks": "jks",
    "truststore.jks": "jks",
}
# Files that carry the private key: written 0600 by the agent.
KEY_FILES = frozenset({"tls.key", "tls-combined.pem", "key.der", "keystore.p12", "keystore.jks"})
DEFAULT_JKS_ALIAS = "certificate"  # cert-manager's default
TRUSTSTORE_ALIAS = "ca"
CONTENT_TYPES = {
    ".crt": "application/x-pem-file",
    ".key": "application/x-pem-file",
    ".pem": "application/x-pem-file",
    ".der": "application/octet-stream",
    ".p12": "application/x-pkcs12",
    ".jks": "application/octet-stream",
}


class FormatError(ValueError):
    """A file this certificate cannot be rendered as (say why, without key material)."""


@dataclass(frozen=True)
class KeyPair:
    tls_crt: str
    tls_key: str
    ca_crt: str


def offered_files(spec: CertificateSpec) -> list[str]:
    """The files a certificate's spec offers, in a stable order."""
    files = list(PEM_FILES)
    kinds = {item["type"] for item in spec.get("additionalOutputFormats") or []}
    if "CombinedPEM" in kinds:
        files.append("tls-combined.pem")
    if "DER" in kinds:
        files += ["key.der", "tls.der"]
    keystores = spec.get("keystores") or {}
    if keystores.get("pkcs12", {"create": False})["create"]:
        files += ["keystore.p12", "truststore.p12"]
    if keystores.get("jks", {"create": False})["create"]:
        files += ["keystore.jks", "truststore.jks"]
    return files


def secret_extras(pair: KeyPair, spec: CertificateSpec) -> dict[str, bytes]:
    """The keys cert-manager adds to the Secret it writes for these fields (for the
    Kubernetes Secret export): keystore passwords from their passwordSecretRef. Raises
    FormatError, or SecretRefError (a LookupError) when a password Secret is missing."""
    from issuance.specs.secret_refs import read_secret_value

    out: dict[str, bytes] = {}
    for filename in offered_files(spec):
        if filename in PEM_FILES or filename == "tls.der":  # tls.der: ours, not cert-manager's
            continue
        password = ""
        if filename in KEYSTORE_FILES:
            keystores = spec.get("keystores") or {}
            store = keystores.get("pkcs12") if filename.endswith(".p12") else keystores.get("jks")
            ref = store.get("passwordSecretRef") if store else None
            if not ref:
                raise FormatError(f"keystores: {filename} needs a passwordSecretRef")
            password = read_secret_value(ref["name"], ref.get("key"))
        out[filename] = render(filename, pair, spec, password)
    return out


def content_type(filename: str) -> str:
    return CONTENT_TYPES.get(filename[filename.rfind(".") :], "application/octet-stream")


def render(filename: str, pair: KeyPair, spec: CertificateSpec, password: str = "") -> bytes:
    """The bytes of `filename` (one of offered_files(spec)). Keystores need `password`."""
    if filename == "tls.crt":
        return pair.tls_crt.encode()
    if filename == "tls.key":
        return pair.tls_key.encode()
    if filename == "ca.crt":
        if not pair.ca_crt:
            raise FormatError("this certificate has no CA certificate (ca.crt is empty)")
        return pair.ca_crt.encode()
    if filename == "tls-combined.pem":
        return (pair.tls_key.rstrip("\n") + "\n" + pair.tls_crt).encode()
    chain = [x509.load_pem_x509_certificate(pem.encode()) for pem in split_pem_chain(pair.tls_crt)]
    if filename == "tls.der":
        return chain[0].public_bytes(serialization.Encoding.DER)
    key = load_stored_private_key(pair.tls_key)
    if filename == "key.der":
        return key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    if not password:
        raise FormatError("no keystore password (set one on the token or passwordSecretRef)")
    cas = _ca_certificates(pair)
    keystores = spec.get("keystores") or {}
    if filename == "keystore.p12":
        profile = keystores.get("pkcs12", {}).get("profile", "LegacyRC2")
        return pkcs12.serialize_key_and_certificates(
            None,
            key,  # type: ignore[arg-type]  # never an ML-DSA key: we only make RSA/EC/Ed25519
            chain[0],
            chain[1:],
            _pkcs12_encryption(profile, password),
        )
    if filename == "truststore.p12":
        profile = keystores.get("pkcs12", {}).get("profile", "LegacyRC2")
        return pkcs12.serialize_key_and_certificates(
            None, None, None, cas, _pkcs12_encryption(profile, password)
        )
    ders = [c.public_bytes(serialization.Encoding.DER) for c in chain]
    if filename == "keystore.jks":
        alias = keystores.get("jks", {}).get("alias", DEFAULT_JKS_ALIAS)
        pkcs8 = key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        entry = jks.PrivateKeyEntry.new(alias, ders, pkcs8, "pkcs8")
        return bytes(jks.KeyStore.new("jks", [entry]).saves(password))
    if filename == "truststore.jks":
        entries = [
            jks.TrustedCertEntry.new(
                TRUSTSTORE_ALIAS if i == 0 else f"{TRUSTSTORE_ALIAS}-{i}",
                c.public_bytes(serialization.Encoding.DER),
            )
            for i, c in enumerate(cas)
        ]
        return bytes(jks.KeyStore.new("jks", entries).saves(password))
    raise FormatError(f"unknown file {filename!r}")


def _ca_certificates(pair: KeyPair) -> list[x509.Certificate]:
    if not pair.ca_crt:
        raise FormatError("this certificate has no CA certificate for a truststore")
    return [x509.load_pem_x509_certificate(pem.encode()) for pem in split_pem_chain(pair.ca_crt)]


def _pkcs12_encryption(profile: str, password: str) -> serialization.KeySerializationEncryption:
    """cert-manager's profiles. Modern2023: PBES2 AES-256-CBC, SHA-256 MAC. LegacyRC2 and
    LegacyDES: 3DES with a SHA-1 MAC (cryptography does not write RC2; Java 8+ and OpenSSL
    read 3DES as they read RC2)."""
    builder = serialization.PrivateFormat.PKCS12.encryption_builder().kdf_rounds(50000)
    if profile == "Modern2023":
        builder = builder.key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC).hmac_hash(
            hashes.SHA256()
        )
    else:
        builder = builder.key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC).hmac_hash(
            hashes.SHA1()  # noqa: S303 - the legacy profile asks for it
        )
    return builder.build(password.encode())
