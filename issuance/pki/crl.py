"""Certificate revocation lists (RFC 5280 §5): a CA issuer's CRL, signed with its key."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed448, ed25519
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

# Relying parties cache a CRL until nextUpdate; a week is what public CAs use for leaf CRLs.
# The CRL is made afresh on every fetch, so a new revocation shows at the next fetch.
CRL_VALIDITY = timedelta(days=7)

_REASON_FLAGS = {
    "keyCompromise": x509.ReasonFlags.key_compromise,
    "affiliationChanged": x509.ReasonFlags.affiliation_changed,
    "superseded": x509.ReasonFlags.superseded,
    "cessationOfOperation": x509.ReasonFlags.cessation_of_operation,
    "privilegeWithdrawn": x509.ReasonFlags.privilege_withdrawn,
}


@dataclass(frozen=True)
class RevokedEntry:
    serial_hex: str
    revoked_at: datetime
    reason: str  # an RFC 5280 reason name (models.revocation.REASONS)


def build_crl(
    ca_key: CertificateIssuerPrivateKeyTypes,
    ca_cert_pem: str,
    entries: Iterable[RevokedEntry],
    *,
    now: datetime,
    validity: timedelta = CRL_VALIDITY,
) -> bytes:
    """The DER CRL listing `entries`, issued by the CA certificate and signed by its key.

    The CRL number (required by RFC 5280 §5.2.3, increasing) is the issuing time in
    milliseconds: CRLs are built on demand, so a counter would need a write per fetch.
    """
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    this_update = now.replace(microsecond=(now.microsecond // 1000) * 1000)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(this_update)
        .next_update(this_update + validity)
        .add_extension(x509.CRLNumber(int(this_update.timestamp() * 1000)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_cert.public_key()  # type: ignore[arg-type]
            ),
            critical=False,
        )
    )
    for entry in entries:
        revoked = (
            x509.RevokedCertificateBuilder()
            .serial_number(int(entry.serial_hex, 16))
            .revocation_date(entry.revoked_at)
        )
        flag = _REASON_FLAGS.get(entry.reason)
        if flag is not None:
            # RFC 5280 §5.3.1: the reasonCode is absent rather than `unspecified`.
            revoked = revoked.add_extension(x509.CRLReason(flag), critical=False)
        builder = builder.add_revoked_certificate(revoked.build())
    unhashed = isinstance(ca_key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey)
    crl = builder.sign(ca_key, None if unhashed else hashes.SHA256())
    return crl.public_bytes(serialization.Encoding.DER)


def distribution_points(urls: Iterable[str]) -> x509.CRLDistributionPoints:
    """The CRL Distribution Points extension (RFC 5280 §4.2.1.13) naming each URL."""
    return x509.CRLDistributionPoints(
        [
            x509.DistributionPoint(
                full_name=[x509.UniformResourceIdentifier(url)],
                relative_name=None,
                reasons=None,
                crl_issuer=None,
            )
            for url in urls
        ]
    )
