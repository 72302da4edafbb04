"""What the local signers (ca, selfSigned) share: how long a certificate may live."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from issuance.durations import DurationError, parse_duration
from issuance.models import CertificateRequest, Issuer, IssuerKind

DEFAULT_DURATION = timedelta(hours=2160)
# Shorter certificates are refused by many clients and make renewal storms; cert-manager
# applies the same floor to Certificates. Applied to every request, owned or external.
MIN_DURATION = timedelta(minutes=10)


class SigningError(ValueError):
    """The request cannot be signed as asked (→ FAILED with this message)."""


def requested_duration(request: CertificateRequest) -> timedelta:
    """spec.duration (Go form), else spec.expirationSeconds (kubelet style), else 2160h."""
    spec = request.typed_spec
    if spec.get("duration"):
        try:
            return parse_duration(str(spec["duration"]))
        except DurationError as exc:
            raise SigningError(f"spec.duration: {exc}") from None
    if spec.get("expirationSeconds") is not None:
        try:
            return timedelta(seconds=int(spec["expirationSeconds"]))
        except (TypeError, ValueError):
            raise SigningError("spec.expirationSeconds must be an integer") from None
    return DEFAULT_DURATION


def max_duration_of(issuer: Issuer) -> str | None:
    """`spec.ca.maxDuration` or `spec.selfSigned.maxDuration`, as written."""
    if issuer.kind == IssuerKind.CA:
        return issuer.ca_spec.get("maxDuration")
    return issuer.self_signed_spec.get("maxDuration")


def max_duration(issuer: Issuer) -> timedelta:
    value = max_duration_of(issuer)
    if value:
        try:
            return parse_duration(str(value))
        except DurationError:
            pass  # the issuer controller reports it; sign with the default cap meanwhile
    cap: timedelta = settings.DEFAULT_MAX_SIGNING_DURATION
    return cap


def signing_duration(request: CertificateRequest, issuer: Issuer) -> timedelta:
    """Requested duration, capped by the issuer's maximum, at least MIN_DURATION."""
    return max(min(requested_duration(request), max_duration(issuer)), MIN_DURATION)
