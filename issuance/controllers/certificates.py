"""Certificate controller (DESIGN §3): readiness, trigger, key manager, request manager,
issuing and revision history, as one reconcile that takes one step per call.

Each call does at most one side effect and returns Result.now() to continue with the
next step, so a worker killed anywhere resumes from what is stored on the rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from issuance import backoff, events, faults
from issuance.controllers import issuing
from issuance.controllers.base import Result
from issuance.controllers.certificate_policy import (
    CertView,
    Violation,
    compute_renewal_time,
    load_view,
    secret_violation,
    until,
)
from issuance.models import Certificate, CertificateState

READY_MESSAGE = "Certificate is up to date and has not expired"


def reconcile(cert: Certificate) -> Result:
    now = timezone.now()
    view = load_view(cert, now)
    # Issuing: the target request is final → store the new revision or count the failure.
    if issuing.record_outcome(view):
        return Result.now()
    violation = secret_violation(view)
    update_readiness(view, violation)
    if not cert.condition_is("Issuing"):
        return trigger(view, violation)
    # Key manager: the next key is stored before any request is made with it.
    if issuing.ensure_next_key(view):
        return Result.now()
    # Request manager: one request per revision, ever. Either way the request's controller
    # wakes us when it is final (a pass right after creating it would find nothing to do).
    issuing.ensure_request(view)
    return Result.done()


# -- readiness -------------------------------------------------------------------------


def update_readiness(view: CertView, violation: Violation | None) -> None:
    """Ready condition, validity, renewal time, backoff time and the one-word state."""
    cert, now, info = view.cert, view.now, view.info
    before = _status_snapshot(cert)
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
    cert.state = _state(cert, view, now)
    cert.observed_generation = cert.generation
    if _status_snapshot(cert) != before:
        issuing.save_status(cert)


def _state(cert: Certificate, view: CertView, now: datetime) -> str:
    if view.info is not None and view.info.not_after <= now:
        return CertificateState.EXPIRED
    if cert.condition_is("Issuing"):
        return CertificateState.ISSUING
    if cert.last_failure_time is not None:
        return CertificateState.FAILED
    if cert.condition_is("Ready"):
        return CertificateState.READY
    return CertificateState.PENDING


def _status_snapshot(cert: Certificate) -> tuple[object, ...]:
    return tuple(getattr(cert, f) for f in issuing.STATUS_FIELDS if f != "updated_at")


# -- trigger ---------------------------------------------------------------------------


def forced(view: CertView) -> bool:
    """A force-renew that no issuance has answered yet.

    A force while a request is in flight is absorbed by that issuance (like `cmctl renew`
    on an issuing certificate): it never leads to a second request alongside it.
    """
    requested = view.cert.renew_requested_at
    if requested is None:
        return False
    if view.latest is None:
        return True
    finished = issuing.finished_at(view.latest)
    return finished is not None and requested > finished


def in_backoff(view: CertView) -> datetime | None:
    """The retry time while the failure backoff applies, else None."""
    cert = view.cert
    if cert.last_failure_time is None:
        return None
    if cert.last_failure_generation is not None and cert.last_failure_generation != cert.generation:
        return None  # the spec changed since the failure: try the new spec at once
    retry = backoff.next_retry_time(cert.last_failure_time, cert.failed_issuance_attempts)
    return retry if retry is not None and retry > view.now else None


def trigger(view: CertView, violation: Violation | None) -> Result:
    """Decide whether a new issuance starts now; else say when to look again."""
    cert, now = view.cert, view.now
    reason, message = "", ""
    if forced(view):
        reason = "ManuallyTriggered"
        by = f" by {cert.renew_requested_by}" if cert.renew_requested_by else ""
        message = f"Certificate re-issuance manually triggered{by}"
    elif violation is not None:
        reason, message = violation.reason, f"Issuing certificate: {violation.message}"
    elif cert.renewal_time is not None and cert.renewal_time <= now:
        reason = "Renewing"
        message = f"Renewing certificate as renewal was scheduled at {cert.renewal_time}"
    if not reason:
        issuing.prune_history(view)
        return _wait_for(cert, now, None)
    retry_at = None if reason == "ManuallyTriggered" else in_backoff(view)
    if retry_at is not None:
        return _wait_for(cert, now, retry_at)
    with transaction.atomic():
        cert.set_condition("Issuing", "True", reason, message, now=now)
        cert.state = _state(cert, view, now)
        issuing.save_status(cert)
        events.record("Certificate", cert.name, "Issuing", message, certificate_name=cert.name)
    faults.checkpoint("after-issuing-set")
    return Result.now()


def _wait_for(cert: Certificate, now: datetime, retry_at: datetime | None) -> Result:
    """Look again at the earliest of: retry time, renewal time, expiry."""
    moments = [m for m in (retry_at, cert.renewal_time, cert.not_after) if m is not None]
    moments = [m for m in moments if m > now] or []
    if not moments:
        return Result.done()
    return Result.after(until(min(moments), now) + timedelta(milliseconds=10))
