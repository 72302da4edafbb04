"""Certificate signing requests: build one from a Certificate's spec, parse untrusted PEM."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from issuance.pki.keys import describe_public_key, public_key_bytes
from issuance.shapes import CertificateNames

MAX_CSR_PEM_BYTES = 64 * 1024


class CSRError(ValueError):
    pass


@dataclass(frozen=True)
class CSRInfo:
    common_name: str
    organizations: list[str]
    dns_names: list[str]
    ip_addresses: list[str]
    uris: list[str]
    emails: list[str]
    key_algorithm: str
    key_size: int
    public_key_der: bytes = field(repr=False)
    subject: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "commonName": self.common_name,
            "organizations": self.organizations,
            "dnsNames": self.dns_names,
            "ipAddresses": self.ip_addresses,
            "uris": self.uris,
            "emailAddresses": self.emails,
            "keyAlgorithm": self.key_algorithm,
            "keySize": self.key_size,
        }


SubjectField = Literal[
    "organizations",
    "countries",
    "organizationalUnits",
    "localities",
    "provinces",
    "streetAddresses",
    "postalCodes",
    "serialNumber",
]
# cert-manager's X509Subject fields, in its order (serialNumber is a single string).
_SUBJECT_OIDS: tuple[tuple[SubjectField, x509.ObjectIdentifier], ...] = (
    ("organizations", NameOID.ORGANIZATION_NAME),
    ("countries", NameOID.COUNTRY_NAME),
    ("organizationalUnits", NameOID.ORGANIZATIONAL_UNIT_NAME),
    ("localities", NameOID.LOCALITY_NAME),
    ("provinces", NameOID.STATE_OR_PROVINCE_NAME),
    ("streetAddresses", NameOID.STREET_ADDRESS),
    ("postalCodes", NameOID.POSTAL_CODE),
    ("serialNumber", NameOID.SERIAL_NUMBER),
)


def _hash_for(key: CertificateIssuerPrivateKeyTypes) -> hashes.SHA256 | None:
    return None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()


def build_csr(key: CertificateIssuerPrivateKeyTypes, spec: CertificateNames) -> str:
    """A CSR for a Certificate spec: commonName, subject.organizations, dnsNames, ipAddresses."""
    attrs = []
    if spec.get("commonName"):
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, str(spec["commonName"])))
    subject = spec.get("subject") or {}
    for field_name, oid in _SUBJECT_OIDS:
        values = subject.get(field_name) or []
        for value in [values] if isinstance(values, str) else values:
            attrs.append(x509.NameAttribute(oid, str(value)))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in spec.get("dnsNames") or []]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in spec.get("ipAddresses") or []]
    sans += [x509.UniformResourceIdentifier(u) for u in spec.get("uris") or []]
    sans += [x509.RFC822Name(e) for e in spec.get("emailAddresses") or []]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    csr = builder.sign(key, _hash_for(key))
    from cryptography.hazmat.primitives import serialization

    return csr.public_bytes(serialization.Encoding.PEM).decode()


def load_csr(pem: str) -> x509.CertificateSigningRequest:
    if not isinstance(pem, str) or not pem.strip():
        raise CSRError("must be a PEM-encoded CERTIFICATE REQUEST")
    if len(pem.encode()) > MAX_CSR_PEM_BYTES:
        raise CSRError(f"CSR is larger than {MAX_CSR_PEM_BYTES} bytes")
    if "-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        raise CSRError("must be a PEM block of type CERTIFICATE REQUEST")
    try:
        csr = x509.load_pem_x509_csr(pem.encode())
    except ValueError as exc:
        raise CSRError(f"malformed CSR: {exc}") from None
    if not csr.is_signature_valid:
        raise CSRError("CSR signature does not verify (the CSR was altered or is corrupt)")
    return csr


def parse_csr(pem: str) -> CSRInfo:
    csr = load_csr(pem)
    subject = csr.subject
    cns = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    dns: list[str] = []
    ips: list[str] = []
    uris: list[str] = []
    emails: list[str] = []
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = [str(v) for v in san.get_values_for_type(x509.DNSName)]
        ips = [str(v) for v in san.get_values_for_type(x509.IPAddress)]
        uris = [str(v) for v in san.get_values_for_type(x509.UniformResourceIdentifier)]
        emails = [str(v) for v in san.get_values_for_type(x509.RFC822Name)]
    except x509.ExtensionNotFound:
        pass
    except ValueError as exc:
        raise CSRError(f"malformed CSR extensions: {exc}") from None
    public_key = csr.public_key()
    algorithm, size = describe_public_key(public_key)
    return CSRInfo(
        common_name=cns[0] if cns else "",
        organizations=orgs,
        dns_names=dns,
        ip_addresses=ips,
        uris=uris,
        emails=emails,
        key_algorithm=algorithm,
        key_size=size,
        public_key_der=public_key_bytes(public_key),
        subject=subject.rfc4514_string(),
    )
