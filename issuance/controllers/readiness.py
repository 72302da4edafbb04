"""Readiness of a Certificate: the Ready condition, validity, renewal
time, backoff time and the one-word state, computed from a CertView.

Computed in memory: the caller saves it together with whatever else the same step changed
(the trigger's Issuing condition and next key, or the new revision after an issuance), so a
pass writes the Certificate row once.
"""

from __future__ import annotations

from datetime import datetime

from issuance.controllers.certificate_policy import CertView, Violation, compute_renewal_time
from issuance.models import Certificate, CertificateState
from issuance.timing import backoff

READY_MESSAGE = "Certificate is up to date and has not expired"

# The status columns readiness writes (a subset of issuing.STATUS_FIELDS).
READINESS_FIELDS = (
    "conditions",
    "state",
    "not_before",
    "not_after",
    "renewal_time",
    "next_retry_time",
    "observed_generation",
)


def apply_readiness(view: CertView, violation: Violation | None) -> bool:
    """Set readiness on `view.cert` (not saved). Returns True when anything changed."""
    cert, now, info = view.cert, view.now, view.info
    before = snapshot(cert)
    if info is not None and view.secret is not None:
        cert.not_before = info.not_before
        cert.not_after = info.not_after
        cert.renewal_time = compute_renewal_time(cert, info)
    else:
        cert.not_before = cert.not_after = cert.renewal_time = None
    cert.next_retry_time = (
        backoff.next_retry_time(cert.last_failure_time, cert.failed_issuance_attempts)
        if cert.last_failure_time is not None
        else None
    )
    if violation is None:
        cert.set_condition("Ready", "True", "Ready", READY_MESSAGE, now=now)
    else:
        cert.set_condition("Ready", "False", violation.reason, violation.message, now=now)
    cert.state = state_of(cert, view, now)
    cert.observed_generation = cert.generation
    return snapshot(cert) != before


def state_of(cert: Certificate, view: CertView, now: datetime) -> str:
    if view.info is not None and view.info.not_after <= now:
        return CertificateState.EXPIRED
    if cert.condition_is("Issuing"):
        return CertificateState.ISSUING
    if cert.last_failure_time is not None:
        return CertificateState.FAILED
    if cert.condition_is("Ready"):
        return CertificateState.READY
    return CertificateState.PENDING


def snapshot(cert: Certificate) -> tuple[object, ...]:
    return tuple(getattr(cert, f) for f in READINESS_FIELDS)
