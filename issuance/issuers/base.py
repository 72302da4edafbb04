"""The seam between the CertificateRequest controller and each issuer kind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum


class SignState(StrEnum):
    PENDING = "pending"  # still working (e.g. an ACME order in flight); look again later
    ISSUED = "issued"
    FAILED = "failed"


@dataclass(frozen=True)
class SignOutcome:
    state: SignState
    certificate_pem: str = ""  # leaf first, then intermediates
    ca_pem: str = ""
    reason: str = ""  # e.g. "OrderFailed: urn:ietf:params:acme:error:unauthorized"
    message: str = ""
    # For PENDING: when to look again (None: wait to be woken by the order controller).
    requeue_after: timedelta | None = None
    # For ISSUED: why the certificate lives shorter than the request asked ('' when it does
    # not), from the signer that knows (issuers.local.shortened).
    shortened: str = ""
