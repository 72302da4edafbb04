"""ACME issuer kind. Placeholder until the ACME work lands (issue 3)."""

from __future__ import annotations

from issuance.controllers.base import PermanentError, Result
from issuance.issuers.base import SignOutcome
from issuance.models import CertificateRequest, Issuer


def reconcile_issuer(issuer: Issuer) -> Result:
    raise PermanentError("ACME issuers are not implemented yet")


def sign(request: CertificateRequest) -> SignOutcome:
    raise PermanentError("ACME issuers are not implemented yet")
