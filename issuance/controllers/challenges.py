"""Challenges controller: a scheduled challenge, from the sync with the CA to the clean-up.

Only scheduled (processing) challenges are worked on; the scheduler decides when a queued
one starts. Each reconcile does one step, keeping its progress on the row:

    state ""          sync with the CA (already valid → done)       → state pending
    pending, !presented   present (HTTP-01 flag / DNS-01 TXT record)  → presented
    pending, presented    self-check, every SELF_CHECK_INTERVAL; when it passes, accept
    processing        poll the authorization until valid / invalid
    final             finished, processing=False, order woken; then clean up (→ !presented)

Accepting is crash-safe: the row says "accepting" (state processing, Accepted=Unknown) before
the answer is sent. A reconcile that finds Accepted=Unknown sends it again (harmless in
ACME); one that finds the CA's challenge still pending after a confirmed answer just polls.
A challenge finished by the scheduler's timeout is only cleaned up.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from issuance.acme.protocol.errors import AcmeProblemError, problem_reason
from issuance.acme.solvers.base import Solver, SolverConfigError
from issuance.acme.solvers.registry import solver_for
from issuance.controllers import scheduler
from issuance.controllers.base import PermanentError, Result, TemporaryError
from issuance.fastpaths.model_save import save_where
from issuance.models import Challenge, ChallengeState, Event, OrderState
from issuance.observability import events
from issuance.shapes import Condition
from issuance.timing.durations import DurationError, parse_duration
from issuance.worker.wakeup import Wake

log = logging.getLogger("issuance.controllers.challenges")

ACCEPTED = "Accepted"
# After accepting, poll the authorization after FIRST_POLL, then half the time since the
# answer (a CA usually validates within a second: Pebble in ~50 ms, Let's Encrypt in a few
# seconds), at most POLL_INTERVAL; after SLOW_POLL_AFTER every SLOW_POLL_INTERVAL.
FIRST_POLL = timedelta(milliseconds=100)
POLL_INTERVAL = timedelta(seconds=1)
SLOW_POLL_INTERVAL = timedelta(seconds=5)
SLOW_POLL_AFTER = timedelta(seconds=30)
# A challenge created "pending" (from a fresh authorization) that waited in the queue longer
# than this is synced with the CA before it is presented.
SYNC_IF_QUEUED_FOR = timedelta(seconds=60)
# Authorization statuses that end the challenge, and the challenge state each becomes.
FINAL_AUTHZ = {
    "valid": ChallengeState.VALID,
    "invalid": ChallengeState.INVALID,
    "expired": ChallengeState.EXPIRED,
    "deactivated": ChallengeState.INVALID,
    "revoked": ChallengeState.INVALID,
}


def _client(challenge: Challenge) -> Any:
    from issuance.acme.fallback import client_of_order

    # The server the order was made at (CA fallback: not always the issuer's first).
    order = challenge.order
    if order.issuer_id == challenge.issuer_id:
        order.issuer = challenge.issuer  # loaded with the challenge: no query for the same row
    return client_of_order(order)


def _event(challenge: Challenge, reason: str, message: str, warning: bool = False) -> None:
    events.record_on(challenge, reason, message, Event.WARNING if warning else Event.NORMAL)


def _save(challenge: Challenge, *fields: str) -> bool:
    """Save progress unless the row was finished meanwhile (scheduler timeout); True if saved.

    One conditional UPDATE instead of locking the row first (a transaction with a SELECT …
    FOR UPDATE and a save); post_save is sent as save() would, for the live updates.
    """
    using = challenge._state.db or DEFAULT_DB_ALIAS
    return save_where(challenge, [*fields, "updated_at"], using, finished=False)


def _stale(challenge: Challenge) -> Result:
    """The row was finished under us: reload and let the next look clean up."""
    challenge.refresh_from_db()
    return Result.now() if challenge.presented else Result.done()


def _problem_text(error: Any) -> str:
    if not isinstance(error, dict):
        return ""
    return problem_reason(str(error.get("type") or ""), str(error.get("detail") or ""))


def _our_challenge(challenge: Challenge, authz: dict[str, Any]) -> dict[str, Any]:
    url = challenge.typed_spec.get("url")
    for chal in authz.get("challenges") or []:
        if isinstance(chal, dict) and (
            chal.get("url") == url
            or (chal.get("token") == challenge.token and chal.get("type") == challenge.type)
        ):
            return chal
    return {}


# -- steps -----------------------------------------------------------------------------


FINISH_FIELDS = ("state", "reason", "processing", "finished", "next_check_at", "updated_at")


def finish(challenge: Challenge, state: str, reason: str) -> Result:
    """Record a final state, free the scheduler slot, wake the order; cleanup comes next."""
    challenge.state = state
    challenge.reason = reason
    challenge.processing = False
    challenge.finished = True
    challenge.next_check_at = None
    fields: tuple[str, ...] = FINISH_FIELDS
    cleaned = challenge.presented and _cleanup_is_local(challenge)
    if cleaned:
        # Nothing outside the database to remove (HTTP-01): cleaned up by the same write.
        challenge.presented = False
        fields = (*FINISH_FIELDS, "presented")
    using = challenge._state.db or DEFAULT_DB_ALIAS
    # Only while unfinished (the scheduler's timeout may have finished it first); the order
    # is woken by the same statement.
    if save_where(challenge, fields, using, wake=Wake(challenge.order), finished=False):
        scheduler.mark_queue_changed()  # a slot is free
        ok = state == ChallengeState.VALID
        _event(
            challenge,
            "Valid" if ok else "Failed",
            f"{challenge.type} challenge for {challenge.dns_name} is {state}"
            + (f": {reason}" if reason else ""),
            warning=not ok,
        )
        if cleaned:
            _cleaned_up_event(challenge)
    else:
        challenge.refresh_from_db()
    return Result.now() if challenge.presented else Result.done()


def _cleanup_is_local(challenge: Challenge) -> bool:
    try:
        return solver_for(challenge).cleanup_in_database
    except SolverConfigError:
        return False


def _sync(challenge: Challenge) -> Result:
    chal = _client(challenge).get_challenge(str(challenge.typed_spec.get("url") or ""))
    status = str(chal.get("status") or "")
    if status == "valid":
        return finish(challenge, ChallengeState.VALID, "")
    if status == "invalid":
        return finish(challenge, ChallengeState.INVALID, _problem_text(chal.get("error")))
    if status == "processing":
        # Accepted before (by us, before a crash): only the outcome is left to see.
        challenge.state = ChallengeState.PROCESSING
        challenge.set_condition(ACCEPTED, "True", "AcceptedBefore", "the CA is validating")
    else:
        challenge.state = ChallengeState.PENDING
    challenge.reason = ""
    if not _save(challenge, "state", "reason", "conditions"):
        return _stale(challenge)
    if challenge.state == ChallengeState.PENDING:
        # Still pending at the CA: present now. The next pass would find the row as long
        # queued as before and sync it again, forever.
        return _present(challenge, solver_for(challenge))
    return Result.now()


def _present(challenge: Challenge, solver: Solver) -> Result:
    try:
        solver.present(challenge)
    except TemporaryError as exc:
        challenge.reason = f"presenting failed: {exc}"
        _save(challenge, "reason")
        raise
    now = timezone.now()
    challenge.presented = True
    challenge.presented_at = now
    challenge.reason = "presented; waiting for the self check"
    if not _save(challenge, "presented", "presented_at", "reason"):
        return _stale(challenge)
    _event(challenge, "Presented", f"presented {challenge.type} for {challenge.dns_name}")
    return Result.now()


def _waited_instead(challenge: Challenge) -> Result | None:
    """The solver's `waitInsteadOfSelfCheck` (cert-manager 1.21): no self-check; the
    challenge is answered once that long has passed since it was presented (for
    split-horizon DNS or NAT, where the console cannot see what the CA will). None when the
    solver has no such wait."""
    solver_spec = challenge.typed_spec.get("solver") or {}
    wait = solver_spec.get("waitInsteadOfSelfCheck") if isinstance(solver_spec, dict) else None
    if not wait:
        return None
    try:
        delay = parse_duration(str(wait))
    except DurationError as exc:
        raise PermanentError(f"solver waitInsteadOfSelfCheck: {exc}") from None
    due = (challenge.presented_at or timezone.now()) + delay
    if timezone.now() >= due:
        return _accept(challenge)
    reason = f"presented; waiting {wait} instead of the self check (waitInsteadOfSelfCheck)"
    if challenge.reason != reason or challenge.next_check_at != due:
        challenge.reason = reason
        challenge.next_check_at = due
        if not _save(challenge, "reason", "next_check_at"):
            return _stale(challenge)
    return Result.after(due - timezone.now())


def _self_check(challenge: Challenge, solver: Solver) -> Result:
    waited = _waited_instead(challenge)
    if waited is not None:
        return waited
    failure = solver.self_check(challenge)
    if failure is not None:
        interval: timedelta = settings.SELF_CHECK_INTERVAL
        first = challenge.attempts == 0 or not challenge.reason.startswith("self check failed")
        challenge.attempts += 1
        challenge.reason = f"self check failed: {failure}"
        challenge.next_check_at = timezone.now() + interval
        if not _save(challenge, "attempts", "reason", "next_check_at"):
            return _stale(challenge)
        if first:
            _event(challenge, "SelfCheckFailed", failure, warning=True)
        return Result.after(interval)
    # Passing: answer at once. Until the answer is stored the row stays pending and
    # presented, so a crash in between makes the next pass check and answer again
    # (answering twice is harmless in ACME): it resends, never skips.
    return _accept(challenge)


def _accept(challenge: Challenge) -> Result:
    """Answer the challenge (POST {}); also resumes a row stored as "accepting"
    (Accepted=Unknown) by an earlier version."""
    challenge.state = ChallengeState.PROCESSING
    challenge.next_check_at = None
    try:
        _client(challenge).answer_challenge(str(challenge.typed_spec.get("url") or ""))
    except AcmeProblemError as exc:
        # Perhaps answered already (crash after the call); the poll decides.
        challenge.set_condition(ACCEPTED, "False", "AnswerRefused", exc.describe())
        if not _save(challenge, "state", "conditions", "next_check_at"):
            return _stale(challenge)
        return Result.now()
    challenge.set_condition(ACCEPTED, "True", "Accepted", "the CA is validating")
    challenge.reason = "accepted; waiting for the CA to validate"
    if not _save(challenge, "state", "conditions", "reason", "next_check_at"):
        return _stale(challenge)
    _event(challenge, "Accepted", f"accepted {challenge.type} challenge for {challenge.dns_name}")
    return Result.after(FIRST_POLL)


def _poll(challenge: Challenge) -> Result:
    authz = _client(challenge).get_authorization(challenge.authorization_url)
    status = str(authz.get("status") or "")
    ours = _our_challenge(challenge, authz)
    if status in FINAL_AUTHZ:
        reason = _problem_text(ours.get("error"))
        if not reason and status != "valid":
            reason = f"authorization is {status}"
        return finish(challenge, FINAL_AUTHZ[status], reason)
    if ours.get("status") == "invalid":
        return finish(challenge, ChallengeState.INVALID, _problem_text(ours.get("error")))
    accepted = challenge.get_condition(ACCEPTED)
    if ours.get("status") == "pending" and accepted and accepted.get("status") == "False":
        return finish(
            challenge,
            ChallengeState.ERRORED,
            f"the CA refused the answer: {accepted.get('message', '')}",
        )
    return Result.after(poll_delay(challenge, accepted))


def _stale_pending(challenge: Challenge) -> bool:
    """Created "pending" from the authorization the order had just read, but queued for so
    long that the CA may have moved on (another order validated the name, or it expired),
    and not yet read again since it was scheduled (a sync stores the row: once is enough)."""
    if challenge.state != ChallengeState.PENDING or challenge.presented:
        return False
    started = challenge.scheduled_at or timezone.now()
    if challenge.updated_at >= started:
        return False
    return started - challenge.created_at > SYNC_IF_QUEUED_FOR


def poll_delay(challenge: Challenge, accepted: Condition | None) -> timedelta:
    """Poll briskly right after accepting (validation usually takes well under a second),
    backing off geometrically to POLL_INTERVAL, then gently after SLOW_POLL_AFTER."""
    since = challenge.scheduled_at or challenge.created_at
    accepted_at = accepted.get("lastTransitionTime") if accepted else None
    if accepted_at:
        since = datetime.fromisoformat(str(accepted_at))
    elapsed = timezone.now() - since
    if elapsed > SLOW_POLL_AFTER:
        return SLOW_POLL_INTERVAL
    return min(max(FIRST_POLL, elapsed / 2), POLL_INTERVAL)


def _cleanup(challenge: Challenge, solver: Solver) -> Result:
    solver.cleanup(challenge)
    challenge.presented = False
    challenge.save(update_fields=["presented", "updated_at"])
    _cleaned_up_event(challenge)
    return Result.done()


def _cleaned_up_event(challenge: Challenge) -> None:
    _event(challenge, "CleanedUp", f"removed the {challenge.type} answer for {challenge.dns_name}")


def reconcile(challenge: Challenge) -> Result:
    if challenge.finished:
        if not challenge.presented:
            return Result.done()
        try:
            return _cleanup(challenge, solver_for(challenge))
        except SolverConfigError as exc:
            # Nothing we can remove with a config that cannot work; say so once and stop.
            challenge.presented = False
            challenge.save(update_fields=["presented", "updated_at"])
            _event(challenge, "CleanupFailed", str(exc), warning=True)
            return Result.done()
    if not challenge.processing:
        return Result.done()  # queued: the scheduler starts it
    try:
        return _step(challenge)
    except PermanentError as exc:
        # A CA refusal or an unusable solver config: retrying will not help, and the order
        # must learn of it (a challenge left processing would hold its slot until the timeout).
        log.warning("challenge %s failed: %s", challenge.name, exc)
        return finish(challenge, ChallengeState.ERRORED, str(exc))


def _step(challenge: Challenge) -> Result:
    order = challenge.order
    if order.is_final and order.state != OrderState.VALID:
        # The order failed (another name's challenge, the CA, a timeout): stop working for it
        # and give the slot back, as cert-manager does by deleting the order's challenges.
        return finish(challenge, ChallengeState.ERRORED, f"the order is {order.state}")
    if not challenge.state or _stale_pending(challenge):
        return _sync(challenge)
    if challenge.state == ChallengeState.PENDING:
        solver = solver_for(challenge)
        if not challenge.presented:
            return _present(challenge, solver)
        return _self_check(challenge, solver)
    if challenge.state == ChallengeState.PROCESSING:
        if challenge.condition_is(ACCEPTED, "Unknown"):
            return _accept(challenge)
        return _poll(challenge)
    # A final state on an unfinished row (written by hand or an old version): finish it.
    return finish(challenge, challenge.state, challenge.reason)
