"""What a Certificate has been, read from the database for a probe's assessment: the leaf
fingerprint of each revision still recorded (its CertificateRequests), the current
revision, and the anchors its chains must reach: the CA's certificate for a `ca` issuer,
the certificate itself for `selfSigned`, the system trust store for `acme`.

A revision whose request was pruned (spec.revisionHistoryLimit) is no longer recognised:
a server still serving it shows as "foreign".
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from issuance.models import Certificate, CertificateRequest, IssuerKind, RequestState
from issuance.pki.x509 import split_pem_chain
from issuance.probing.assess import Known, fingerprint


def known_of(cert: Certificate) -> Known:
    rows = CertificateRequest.objects.filter(
        certificate=cert, state=RequestState.ISSUED, revision__isnull=False
    ).values_list("revision", "certificate_pem", "ca_pem")
    revisions: dict[str, int] = {}
    leaves: list[x509.Certificate] = []
    cas: list[x509.Certificate] = []
    for revision, chain_pem, ca_pem in rows:
        parts = split_pem_chain(chain_pem)
        if not parts or revision is None:
            continue
        leaf = x509.load_pem_x509_certificate(parts[0].encode())
        revisions[fingerprint(leaf.public_bytes(Encoding.DER))] = revision
        leaves.append(leaf)
        cas.extend(x509.load_pem_x509_certificate(p.encode()) for p in split_pem_chain(ca_pem))
    kind = cert.issuer.kind
    if kind == IssuerKind.ACME:
        return Known(revisions, cert.revision, system_anchors(), "the system trust store")
    if kind == IssuerKind.SELF_SIGNED:
        return Known(revisions, cert.revision, leaves, "this certificate's own revisions")
    return Known(revisions, cert.revision, _unique(cas), f"the CA of issuer {cert.issuer.name}")


def _unique(certs: list[x509.Certificate]) -> list[x509.Certificate]:
    seen: dict[bytes, x509.Certificate] = {}
    for c in certs:
        seen.setdefault(c.public_bytes(Encoding.DER), c)
    return list(seen.values())


@functools.cache
def system_anchors() -> list[x509.Certificate]:
    """The system's trusted roots (OpenSSL's default CA file), read once per process."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            try:
                return x509.load_pem_x509_certificates(Path(candidate).read_bytes())
            except ValueError:
                continue
    return []
