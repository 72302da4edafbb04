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
from issuance.shapes import CertificateNames, NameConstraintItem, NameConstraintsSpec

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
    # (oid, text) of each otherName SAN, and the name constraints extension (its DER, with
    # whether it is critical), to tell a CSR from the spec it should have been built from.
    other_names: tuple[tuple[str, str], ...] = ()
    name_constraints: tuple[bytes, bool] | None = None

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
    sans += [other_name(o["oid"], o["utf8Value"]) for o in spec.get("otherNames") or []]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    constraints = spec.get("nameConstraints")
    if constraints:
        # cert-manager asks for them in the CSR too; the signer copies them (pki/signing.py).
        builder = builder.add_extension(
            name_constraints(constraints), critical=bool(constraints.get("critical"))
        )
    csr = builder.sign(key, _hash_for(key))
    from cryptography.hazmat.primitives import serialization

    return csr.public_bytes(serialization.Encoding.PEM).decode()


def _der_utf8_string(text: str) -> bytes:
    """DER of a UTF8String (tag 12): cryptography takes an otherName's value as DER."""
    data = text.encode()
    size = len(data)
    if size < 0x80:
        return bytes([0x0C, size]) + data
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([0x0C, 0x80 | len(length)]) + length + data


def other_name(oid: str, utf8_value: str) -> x509.OtherName:
    """An otherName SAN whose value is a UTF8String, as cert-manager encodes `otherNames`."""
    return x509.OtherName(x509.ObjectIdentifier(oid), _der_utf8_string(utf8_value))


def other_name_value(name: x509.OtherName) -> str:
    """The text of an otherName written by other_name() (or by cert-manager); other
    encodings are shown as hex."""
    der = name.value
    if len(der) >= 2 and der[0] == 0x0C:
        start = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)
        try:
            return der[start:].decode()
        except UnicodeDecodeError:
            pass
    return der.hex()


def _subtrees(item: NameConstraintItem) -> list[x509.GeneralName] | None:
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in item.get("dnsDomains") or []]
    names += [x509.IPAddress(ipaddress.ip_network(r)) for r in item.get("ipRanges") or []]
    names += [x509.RFC822Name(e) for e in item.get("emailAddresses") or []]
    names += [x509.UniformResourceIdentifier(u) for u in item.get("uriDomains") or []]
    return names or None


def name_constraints(spec: NameConstraintsSpec) -> x509.NameConstraints:
    return x509.NameConstraints(
        permitted_subtrees=_subtrees(spec.get("permitted") or {}),
        excluded_subtrees=_subtrees(spec.get("excluded") or {}),
    )


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
    others: tuple[tuple[str, str], ...] = ()
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = [str(v) for v in san.get_values_for_type(x509.DNSName)]
        ips = [str(v) for v in san.get_values_for_type(x509.IPAddress)]
        uris = [str(v) for v in san.get_values_for_type(x509.UniformResourceIdentifier)]
        emails = [str(v) for v in san.get_values_for_type(x509.RFC822Name)]
        others = tuple(
            (n.type_id.dotted_string, other_name_value(n))
            for n in san.get_values_for_type(x509.OtherName)
        )
    except x509.ExtensionNotFound:
        pass
    except ValueError as exc:
        raise CSRError(f"malformed CSR extensions: {exc}") from None
    constraints = None
    try:
        ext = csr.extensions.get_extension_for_class(x509.NameConstraints)
        constraints = (ext.value.public_bytes(), ext.critical)
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
        other_names=others,
        name_constraints=constraints,
    )
