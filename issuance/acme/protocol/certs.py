"""Certificate helpers of the ACME client that need no network: chains, ARI ids/windows."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from django.utils.dateparse import parse_datetime


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _issuer_cn(cert: x509.Certificate) -> str:
    values = cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else ""


def chain_matches(chain_pem: str, preferred: str) -> bool:
    """True if the chain's top certificate is issued by (or is) the CA named `preferred`."""
    from issuance.pki.x509 import split_pem_chain

    blocks = split_pem_chain(chain_pem)
    if not blocks:
        return False
    top = x509.load_pem_x509_certificate(blocks[-1].encode())
    subject_cns = [str(a.value) for a in top.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return _issuer_cn(top) == preferred or preferred in subject_cns


def ari_cert_id(cert_pem: str) -> str:
    """RFC 9773 certificate identifier: base64url(AKI keyIdentifier) "." base64url(serial)."""
    from issuance.pki.x509 import load_leaf

    cert = load_leaf(cert_pem)
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    if aki.key_identifier is None:
        raise ValueError("certificate has no authority key identifier")
    serial = cert.serial_number
    serial_bytes = serial.to_bytes(math.ceil((serial.bit_length() + 1) / 8), "big", signed=True)
    return f"{_b64(aki.key_identifier)}.{_b64(serial_bytes)}"


def parse_renewal_info(body: dict[str, Any]) -> tuple[datetime, datetime] | None:
    window = body.get("suggestedWindow") or {}
    start = parse_datetime(str(window.get("start") or ""))
    end = parse_datetime(str(window.get("end") or ""))
    if start is None or end is None or end < start:
        return None
    return start, end


@dataclass(frozen=True)
class RenewalInfo:
    """A renewalInfo answer: the suggested window (None if unusable) and the CA's
    Retry-After, which says when to ask again (RFC 9773 §4.3)."""

    window: tuple[datetime, datetime] | None
    retry_after: timedelta | None
    explanation_url: str = ""


def parse_retry_after(value: str | None, now: datetime | None = None) -> timedelta | None:
    """Retry-After as seconds or an HTTP date (RFC 9110 §10.2.3); None when absent/bad."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(when - (now or datetime.now(UTC)), timedelta(0))
