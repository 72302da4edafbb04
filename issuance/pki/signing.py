"""Signing a CSR with a CA key pair or with its own key (selfSigned)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

from issuance.pki.crl import distribution_points
from issuance.pki.csr import load_csr

# notBefore is moved back this much, so clocks a little behind still accept the certificate.
BACKDATE = timedelta(minutes=5)

_EXTENDED = {
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
}
_KEY_USAGE_FIELDS = {
    "digital signature": "digital_signature",
    "content commitment": "content_commitment",
    "key encipherment": "key_encipherment",
    "data encipherment": "data_encipherment",
    "key agreement": "key_agreement",
    "cert sign": "key_cert_sign",
    "crl sign": "crl_sign",
}
SUPPORTED_USAGES = frozenset({*_EXTENDED, *_KEY_USAGE_FIELDS, "signing", "any"})
DEFAULT_USAGES = ("digital signature", "key encipherment")


def sign_csr(
    csr_pem: str,
    signer_key: CertificateIssuerPrivateKeyTypes,
    issuer_cert_pem: str | None,
    *,
    duration: timedelta,
    now: datetime,
    usages: Sequence[str] = DEFAULT_USAGES,
    is_ca: bool = False,
    crl_urls: Sequence[str] = (),
) -> str:
    """Sign; `issuer_cert_pem=None` means self-signed (subject = issuer, signer = CSR key).

    `crl_urls`: where relying parties fetch the issuer's CRL (a CA issuer's
    `crlDistributionPoint`), written as the CRL Distribution Points extension.
    """
    csr = load_csr(csr_pem)
    not_before = now - BACKDATE
    not_after = now + duration
    if issuer_cert_pem:
        issuer_cert = x509.load_pem_x509_certificate(issuer_cert_pem.encode())
        issuer_name = issuer_cert.subject
        # Never outlive the CA: a chain that expires later than its root is useless anyway.
        not_after = min(not_after, issuer_cert.not_valid_after_utc)
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_cert.public_key()  # type: ignore[arg-type]
        )
    else:
        issuer_name = csr.subject
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key())
    public_key = csr.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(csr.subject)
        .issuer_name(issuer_name)
        .public_key(public_key)
        .serial_number(int.from_bytes(secrets.token_bytes(16), "big") >> 1)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(public_key),
            critical=False,
        )
        .add_extension(aki, critical=False)
    )
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        builder = builder.add_extension(san.value, critical=False)
    except x509.ExtensionNotFound:
        pass
    if is_ca:
        # Name constraints bind only what a CA signs; cert-manager copies them from the CSR.
        try:
            constraints = csr.extensions.get_extension_for_class(x509.NameConstraints)
            builder = builder.add_extension(constraints.value, critical=constraints.critical)
        except x509.ExtensionNotFound:
            pass
    usage_set = set(usages or DEFAULT_USAGES)
    if is_ca:
        usage_set |= {"cert sign", "crl sign", "digital signature"}
    flags = {f: (u in usage_set) for u, f in _KEY_USAGE_FIELDS.items()}
    builder = builder.add_extension(
        x509.KeyUsage(encipher_only=False, decipher_only=False, **flags), critical=True
    )
    ext = [_EXTENDED[u] for u in sorted(usage_set) if u in _EXTENDED]
    if ext:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ext), critical=False)
    if crl_urls:
        builder = builder.add_extension(distribution_points(crl_urls), critical=False)
    algorithm = None if isinstance(signer_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    cert = builder.sign(signer_key, algorithm)
    return cert.public_bytes(serialization.Encoding.PEM).decode()
