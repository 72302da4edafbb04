"""Reading issued certificates: validity, names, key match, chains."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from cryptography import x509
from cryptography.x509.oid import NameOID

from issuance.pki.keys import describe_public_key, public_key_bytes

_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----\s+.*?-----END CERTIFICATE-----", re.DOTALL)


@dataclass(frozen=True)
class CertInfo:
    not_before: datetime
    not_after: datetime
    common_name: str
    dns_names: list[str]
    ip_addresses: list[str]
    key_algorithm: str
    key_size: int
    public_key_der: bytes
    serial_number: str
    issuer: str
    subject: str
    is_ca: bool


def split_pem_chain(pem: str) -> list[str]:
    return [m.group(0) + "\n" for m in _PEM_CERT.finditer(pem or "")]


def load_leaf(pem: str) -> x509.Certificate:
    blocks = split_pem_chain(pem)
    if not blocks:
        raise ValueError("no PEM CERTIFICATE block")
    return x509.load_pem_x509_certificate(blocks[0].encode())


def cert_info(pem: str) -> CertInfo:
    cert = load_leaf(pem)
    cns = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    dns: list[str] = []
    ips: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = [str(v) for v in san.get_values_for_type(x509.DNSName)]
        ips = [str(v) for v in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        pass
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    public_key = cert.public_key()
    algorithm, size = describe_public_key(public_key)
    return CertInfo(
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        common_name=cns[0] if cns else "",
        dns_names=dns,
        ip_addresses=ips,
        key_algorithm=algorithm,
        key_size=size,
        public_key_der=public_key_bytes(public_key),
        serial_number=format(cert.serial_number, "x"),
        issuer=cert.issuer.rfc4514_string(),
        subject=cert.subject.rfc4514_string(),
        is_ca=is_ca,
    )
