"""What the local signers (ca, selfSigned) share: how long a certificate may live."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from issuance.models import CertificateRequest, Issuer, IssuerKind
from issuance.timing.durations import DurationError, describe_duration, parse_duration

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


def shortened(
    request: CertificateRequest, issuer: Issuer, now: datetime, ca_not_after: datetime | None = None
) -> str:
    """Why a certificate signed now lives shorter than the request asked ('' when it does not).

    cert-manager signs for less than `duration` without a word when `maxDuration` or the CA's
    own expiry is shorter; a user then finds out at the next renewal. The reason goes into the
    CertificateRequest's and the Certificate's `DurationCapped` condition and the timeline."""
    asked = requested_duration(request)
    given = max(min(asked, max_duration(issuer)), MIN_DURATION)
    why = ""
    if given < asked:
        written = max_duration_of(issuer)
        why = (
            f"the issuer's maxDuration is {describe_duration(given)}"
            if written
            else f"DEFAULT_MAX_SIGNING_DURATION is {describe_duration(given)} and the issuer "
            "sets no maxDuration"
        )
    if ca_not_after is not None and ca_not_after < now + given:
        given = ca_not_after - now
        why = (
            f"the CA certificate expires at {ca_not_after:%Y-%m-%d %H:%M} UTC and a certificate "
            "cannot outlive its CA"
        )
    if given >= asked:
        return ""
    return shortened_message(given, asked, why)


def shortened_message(given: timedelta, asked: timedelta, why: str) -> str:
    """The DurationCapped message, for every issuer kind. Whole minutes: a CA's expiry, or
    the time since an ACME server signed, makes an odd remainder nobody needs to read."""
    shown = timedelta(minutes=max(int(given.total_seconds() // 60), 0))
    return (
        f"Signed for {describe_duration(shown)} instead of the requested "
        f"{describe_duration(asked)}: {why}"
    )
