"""Certificate controller: readiness, trigger, key manager, request manager,
issuing and revision history.

A pass goes as far as it can: an issuance that starts sets Issuing and the next private key
in one write of the row, then creates the request for the next revision. Each step stores
its progress before the next one acts on it (the key is stored before a request is made
with it; a request per revision, ever), so a worker killed anywhere resumes from what is
stored on the rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from issuance.acme import ari
from issuance.controllers import faults, issuing
from issuance.controllers.base import Result
from issuance.controllers.certificate_policy import (
    CertView,
    Violation,
    compute_renewal_time,
    load_view,
    secret_violation,
    until,
)
from issuance.controllers.readiness import apply_readiness, state_of
from issuance.models import Certificate, IssuerKind
from issuance.observability import events
from issuance.timing.backoff import next_retry_time
from issuance.timing.renewal import renewal_disabled


def reconcile(cert: Certificate) -> Result:
    now = timezone.now()
    view = load_view(cert, now)
    # Issuing: the target request is final → store the new revision or count the failure
    # (readiness included); then go on from the new state.
    view = issuing.record_outcome(view) or view
    violation = secret_violation(view)
    changed = apply_readiness(view, violation)
    polled = poll_renewal_info(view, violation)
    changed = changed or polled is not None
    started = ""
    if not cert.condition_is("Issuing"):
        why = trigger(view, violation)
        if isinstance(why, Result):
            if changed:
                issuing.save_status(cert)
            if polled is not None:
                polled.record(cert)
            return why
        reason, started = why
        cert.set_condition("Issuing", "True", reason, started, now=now)
        cert.state = state_of(cert, view, now)
        changed = True
    # Key manager: the next key is stored (with Issuing, in one write) before any request
    # is made with it; a key someone stored meanwhile is never replaced.
    loaded_key = cert.next_private_key_ciphertext
    key_event = issuing.prepare_next_key(view)
    if key_event:
        issuing.save_status(cert, expect_key=loaded_key)
    elif changed:
        issuing.save_status(cert)
    if polled is not None:
        polled.record(cert)
    if started:
        events.record("Certificate", cert.name, "Issuing", started, certificate_name=cert.name)
        faults.checkpoint("after-issuing-set")
    if key_event:
        events.record(
            "Certificate",
            cert.name,
            key_event,
            issuing.KEY_EVENTS[key_event],
            certificate_name=cert.name,
        )
        faults.checkpoint("after-key-stored")
    # Request manager: one request per revision, ever. Either way the request's controller
    # wakes us when it is final.
    issuing.ensure_request(view)
    return Result.done()


# -- ARI ---------------------------------------------------------------------------------


def poll_renewal_info(view: CertView, violation: Violation | None) -> ari.Polled | None:
    """Read the CA's renewalInfo when its next check is due, and move the renewal time by
    it (in memory; saved with the pass). None when it was not due.

    Only for a good certificate from an ACME issuer that may renew: a violation re-issues
    anyway, and an issuance in flight brings a new certificate (and a new window)."""
    cert, now = view.cert, view.now
    if violation is not None or view.info is None or view.secret is None:
        return None
    if cert.condition_is("Issuing") or renewal_disabled(cert.spec.get("renewal")):
        return None
    if cert.ari_next_check is not None and cert.ari_next_check > now:
        return None
    # The current request's issuer is the certificate's (else IncorrectIssuer) and comes
    # with the view: no query for non-ACME certificates.
    if view.current is None or view.current.issuer.kind != IssuerKind.ACME:
        return None
    polled = ari.poll(cert, view.current, view.secret.tls_crt, now)
    cert.renewal_time = compute_renewal_time(cert, view.info)
    return polled


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
    retry = next_retry_time(cert.last_failure_time, cert.failed_issuance_attempts)
    return retry if retry is not None and retry > view.now else None


def trigger(view: CertView, violation: Violation | None) -> tuple[str, str] | Result:
    """Whether a new issuance starts now: (reason, message) if so, else when to look again."""
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
    return reason, message


def _wait_for(cert: Certificate, now: datetime, retry_at: datetime | None) -> Result:
    """Look again at the earliest of: retry time, renewal time, expiry."""
    # The next renewalInfo read too: a window the CA moves is heard when it says.
    candidates = (retry_at, cert.renewal_time, cert.not_after, cert.ari_next_check)
    moments = [m for m in candidates if m is not None]
    moments = [m for m in moments if m > now] or []
    if not moments:
        return Result.done()
    return Result.after(until(min(moments), now) + timedelta(milliseconds=10))
