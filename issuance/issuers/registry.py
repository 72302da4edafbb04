"""Issuer kind → sign function (the CertificateRequest controller dispatches through this)."""

from __future__ import annotations

from collections.abc import Callable

from issuance.controllers.base import PermanentError
from issuance.issuers.base import SignOutcome
from issuance.models import CertificateRequest, IssuerKind

Signer = Callable[[CertificateRequest], SignOutcome]


def signer_for(kind: str) -> Signer:
    # Imported lazily: the ACME module is heavy and owned by another part of the code base.
    if kind == IssuerKind.CA:
        from issuance.issuers import ca

        return ca.sign
    if kind == IssuerKind.SELF_SIGNED:
        from issuance.issuers import selfsigned

        return selfsigned.sign
    if kind == IssuerKind.ACME:
        from issuance.acme import issuer

        return issuer.sign
    raise PermanentError(f"unknown issuer kind {kind!r}")


def sign(request: CertificateRequest) -> SignOutcome:
    return signer_for(request.issuer.kind)(request)
