"""The issuing steps of a Certificate: key manager, request manager, outcome, history.

Each function does at most one side effect and stores its progress on the rows, so a
worker killed between any two of them resumes without a second request for a revision
and without losing or replacing the key a request was made with.

Revisions: requests are unique per (certificate, revision). The *target* request is the
newest one whose revision is above `Certificate.revision`. A retry after a recorded
failure, or a new attempt because the spec changed, gets the next unused revision; on
success `Certificate.revision` becomes the revision of the request that succeeded.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from issuance.acme import ari
from issuance.controllers import faults
from issuance.controllers.base import TemporaryError
from issuance.controllers.certificate_policy import (
    CONTROLLER_USERNAME,
    CertView,
    desired_request_spec,
    key_mismatch,
    request_mismatch,
    secret_violation,
)
from issuance.controllers.dbutil import guarded
from issuance.controllers.readiness import apply_readiness
from issuance.fastpaths.model_save import save_where
from issuance.issuers import ca
from issuance.models import (
    Certificate,
    CertificateRequest,
    Endpoint,
    Event,
    RequestState,
    Revocation,
    Secret,
    validate_resource_name,
)
from issuance.notifications import webhooks
from issuance.observability import events
from issuance.pki.csr import CSRError, build_csr, parse_csr
from issuance.pki.keys import KeyError_, StoredKey, generate_private_key, private_key_to_pem
from issuance.pki.x509 import cert_info
from issuance.probing import schedule as probe_schedule
from issuance.shapes import CertificateRequestSpec

STATUS_FIELDS = [
    "conditions",
    "state",
    "not_before",
    "not_after",
    "renewal_time",
    "revision",
    "last_failure_time",
    "failed_issuance_attempts",
    "next_retry_time",
    "last_failure_generation",
    "next_private_key_ciphertext",
    "next_private_key_created_at",
    "observed_generation",
    *ari.ARI_FIELDS,
    "updated_at",
]


def save_status(cert: Certificate, *, expect_key: str | None = None) -> None:
    """Only status columns: the API may change spec/generation/renew fields concurrently.

    With `expect_key` (the next key's ciphertext as loaded) the row is written only if
    nobody stored another next key meanwhile: a stored key is never replaced, since a
    request may have been made with it.
    """
    if expect_key is None:
        cert.save(update_fields=STATUS_FIELDS)
        return
    using = cert._state.db or DEFAULT_DB_ALIAS
    if not save_where(cert, STATUS_FIELDS, using, next_private_key_ciphertext=expect_key):
        raise TemporaryError(
            f"the next private key of {cert.name} changed meanwhile; looking again"
        )


# -- key manager -----------------------------------------------------------------------


def prepare_next_key(view: CertView) -> str:
    """Make sure a usable next private key is set on the Certificate (in memory: the caller
    stores it with the rest of the step's status, before any request is made with it).

    Returns the timeline reason ("Generated" or "Reused") when it set one, else "". An
    existing next key that still fits the spec is never replaced. The key set is remembered
    in the pass's keys, so the request manager uses it without decrypting it back.
    """
    cert = view.cert
    current = view.next_key()
    if current is not None and not key_mismatch(cert, current):
        return ""
    reuse, secret = view.key, view.secret
    if (
        cert.rotation_policy == "Never"
        and reuse is not None
        and secret is not None
        and not key_mismatch(cert, reuse)
        and not _revoked(view)
    ):
        # The Secret's own ciphertext: one key, one ciphertext, decrypted once per pass.
        cert.next_private_key_ciphertext = secret.tls_key_ciphertext
        cert.next_private_key_created_at = view.now
        view.keys.remember(secret.tls_key_ciphertext, reuse)
        return "Reused"
    try:
        key = generate_private_key(cert.private_key_spec)
    except KeyError_ as exc:
        raise TemporaryError(f"spec.privateKey: {exc}") from None
    encoding = str(cert.private_key_spec.get("encoding") or "PKCS1")
    pem = private_key_to_pem(key, encoding)
    cert.set_next_private_key(pem, view.now)
    view.keys.remember(cert.next_private_key_ciphertext, StoredKey.of(pem, key))
    return "Generated"


def _revoked(view: CertView) -> bool:
    """The stored certificate was revoked: its key is not reused (rotationPolicy Never)."""
    info = view.info
    return (
        info is not None
        and Revocation.objects.filter(certificate=view.cert, serial=info.serial_number).exists()
    )


KEY_EVENTS = {
    "Generated": "Stored a new private key",
    "Reused": "Reusing the current private key (rotationPolicy Never)",
}


# -- request manager -------------------------------------------------------------------


def request_name(cert: Certificate, revision: int, salt: str = "") -> str:
    suffix = f"-{revision}"
    if salt:
        suffix = f"-{hashlib.sha256(f'{cert.pk}:{salt}'.encode()).hexdigest()[:8]}{suffix}"
    name = cert.name + suffix
    if len(name) > 253:
        digest = hashlib.sha256(cert.name.encode()).hexdigest()[:8]
        head = cert.name[: 253 - len(suffix) - 9].rstrip("-.")
        name = f"{head}-{digest}{suffix}"
    validate_resource_name(name)
    return name


def target_matches(view: CertView, request: CertificateRequest) -> bool:
    """The request was made with the stored next key and for the spec as it is now."""
    key = view.next_key()
    if key is None or key.key is None:
        return False
    try:
        csr = parse_csr(request.csr_pem)
    except CSRError:
        return False
    return csr.public_key_der == key.public_der and not request_mismatch(view.cert, request)


def ensure_request(view: CertView) -> CertificateRequest | None:
    """Create the request for the next revision unless the target request still applies.

    Returns the new request, or None when there is nothing to create (waiting on one).
    """
    cert = view.cert
    target = view.target
    if target is not None and target_matches(view, target):
        if not target.is_final:
            return None  # in flight; its controller wakes us when it is final
        if not failure_recorded(cert, target):
            return None  # the outcome step records it first
    key = view.next_key()
    if key is None or key.key is None:
        # prepare_next_key stored a usable one earlier in this pass: someone changed it since.
        raise TemporaryError(f"the next private key of {cert.name} is not readable; looking again")
    # The newest request has the highest revision of all (the view loaded it): no MAX query.
    latest = view.latest.revision if view.latest is not None else None
    revision = max(latest or 0, cert.revision or 0) + 1
    csr = build_csr(key.key, cert.typed_spec)
    spec: CertificateRequestSpec = {
        "request": csr,
        **desired_request_spec(cert),
        "requester": {"username": CONTROLLER_USERNAME, "source": "certificate"},
    }
    for salt in ("", "retry"):
        try:
            # One INSERT, committed on its own (autocommit); a savepoint only inside a
            # caller's transaction, where a failed INSERT must not spoil the rest.
            with guarded():
                request = CertificateRequest.objects.create(
                    name=request_name(cert, revision, salt),
                    spec=spec,
                    issuer=cert.issuer,
                    certificate=cert,
                    revision=revision,
                    requester=CONTROLLER_USERNAME,
                    source="certificate",
                    due_at=timezone.now(),
                )
        except IntegrityError:
            existing = CertificateRequest.objects.filter(certificate=cert, revision=revision)
            if existing.exists():
                return None  # another worker made it; the next pass picks it up
            continue  # the name is taken by an unrelated request: try a salted one
        events.record(
            "Certificate",
            cert.name,
            "Requested",
            f"Created new CertificateRequest {request.name} (revision {revision})",
            certificate_name=cert.name,
        )
        transaction.on_commit(_notify)
        faults.checkpoint("after-request-created")
        return request
    raise TemporaryError(f"cannot name a CertificateRequest for revision {revision}")


def _notify() -> None:
    from issuance.worker.wakeup import notify_workers

    notify_workers()


def finished_at(request: CertificateRequest) -> datetime | None:
    """When the request reached its final state (None while it is in flight)."""
    if not request.is_final:
        return None
    if request.failure_time is not None:
        return request.failure_time
    cond = request.get_condition("Ready")
    if cond is None:
        return request.updated_at
    try:
        return datetime.fromisoformat(str(cond["lastTransitionTime"]))
    except (KeyError, ValueError):
        return request.updated_at


def failure_recorded(cert: Certificate, request: CertificateRequest) -> bool:
    """The Certificate already counted this request's failure (or the bad result it issued)."""
    done = finished_at(request)
    return (
        cert.last_failure_time is not None and done is not None and cert.last_failure_time >= done
    )


# -- outcome ---------------------------------------------------------------------------


def record_outcome(view: CertView) -> CertView | None:
    """The target request reached a final state: store the new revision or the failure,
    with the readiness that follows from it (one write of the Certificate).

    Returns the view as it is after the write, or None when there was nothing to record.
    """
    cert, target = view.cert, view.target
    if target is None or not target.is_final:
        return None
    key = view.next_key()
    if key is None or not target_matches(view, target):
        return None
    if failure_recorded(cert, target):
        return None
    if target.state == RequestState.ISSUED:
        return _store_issued(view, target, key)
    cond = target.get_condition("Ready")
    reason = "Denied" if target.state == RequestState.DENIED else "Failed"
    message = (cond and cond.get("message")) or target.state
    return record_failure(view, reason, str(message), target)


def record_failure(
    view: CertView, reason: str, message: str, request: CertificateRequest | None = None
) -> CertView:
    """A failed issuance: count it, back off, keep the next key for the retry."""
    cert, now = view.cert, view.now
    done = finished_at(request) if request is not None else None
    failed_at = max(now, done) if done is not None else now
    attempts = (cert.failed_issuance_attempts or 0) + 1
    cert.failed_issuance_attempts = attempts
    cert.last_failure_time = failed_at
    cert.last_failure_generation = cert.generation
    text = f"The certificate request has failed to complete and will be retried: {message}"
    cert.set_condition("Issuing", "False", reason, text, now=now)
    apply_readiness(view, secret_violation(view))
    save_status(cert)
    retry = cert.next_retry_time.isoformat() if cert.next_retry_time else "?"
    events.record(
        "Certificate",
        cert.name,
        reason,
        f"{message} (attempt {attempts}; next retry at {retry})",
        type_=Event.WARNING,
        certificate_name=cert.name,
    )
    faults.checkpoint("after-failure-recorded")
    return view


def _store_issued(view: CertView, request: CertificateRequest, key: StoredKey) -> CertView:
    cert = view.cert
    try:
        issued = cert_info(request.certificate_pem)
    except ValueError as exc:
        return record_failure(view, "Failed", f"issued certificate is unreadable: {exc}", request)
    if issued.public_key_der != key.public_der:
        return record_failure(
            view,
            "Failed",
            f"the certificate in {request.name} does not match the private key it was "
            "requested with",
            request,
        )
    with transaction.atomic():
        secret = _writable_secret(view)
        secret.tls_crt = request.certificate_pem
        secret.ca_crt = request.ca_pem
        secret.tls_key = key.pem
        secret.certificate = cert
        secret.save()
        cert.revision = request.revision
        cert.set_next_private_key("", view.now)
        cert.failed_issuance_attempts = None
        cert.last_failure_time = None
        cert.last_failure_generation = None
        cert.remove_condition("Issuing")
        # The request's word on a shortened lifetime holds for the revision it made.
        capped = request.get_condition("DurationCapped")
        if capped:
            cert.set_condition(
                "DurationCapped",
                "True",
                capped.get("reason", ""),
                capped.get("message", ""),
                now=view.now,
            )
        else:
            cert.remove_condition("DurationCapped")
        ari.clear(cert)  # the window was the previous certificate's: read the new one's
        after = replace(
            view,
            secret=secret,
            info=issued,
            key=key,
            current=request,
            target=None,
            checked=None,
        )
        apply_readiness(after, secret_violation(after))
        save_status(cert)
        # In this transaction: the notice exists exactly when the revision does.
        webhooks.queue_issued(cert, request.revision, issued, _notify)
        # Its endpoints are probed at once (one indexed UPDATE; the probes run on the probe
        # step's threads, never in this pass).
        probe_schedule.make_due(
            Endpoint.objects.filter(certificate=cert),
            view.now,
            other_processes=False,
            new_revision=True,
        )
    events.record(
        "Certificate",
        cert.name,
        "Issued",
        f"The certificate has been successfully issued (revision {request.revision}, "
        f"serial {issued.serial_number})",
        certificate_name=cert.name,
    )
    if cert.typed_spec.get("isCA"):
        ca.wake_readers(cert.secret_name)
    faults.checkpoint("after-secret-written")
    return after


def _writable_secret(view: CertView) -> Secret:
    """The Secret to write the new pair into, locked; a new one when there is none yet.

    A first issuance (no Secret when the pass started) inserts without a look-up: a Secret
    made meanwhile under that name makes the INSERT fail, and the pass is tried again.
    """
    cert = view.cert
    secret = None
    if view.secret is not None:
        secret = Secret.objects.select_for_update().filter(name=cert.secret_name).first()
    if secret is None:
        return Secret(name=cert.secret_name)
    if secret.certificate_id not in (None, cert.pk):
        raise TemporaryError(
            f"secret {cert.secret_name!r} belongs to another certificate; not overwriting it"
        )
    return secret


# -- revision history ------------------------------------------------------------------


def prune_history(view: CertView) -> int:
    """Keep at most revisionHistoryLimit requests; never the current or an in-flight one."""
    cert = view.cert
    limit = cert.revision_history_limit
    if limit is None or limit < 1:
        return 0
    keep = set(
        CertificateRequest.objects.filter(certificate=cert)
        .order_by("-revision")
        .values_list("pk", flat=True)[:limit]
    )
    old = CertificateRequest.objects.filter(
        certificate=cert, state__in=[RequestState.ISSUED, RequestState.FAILED, RequestState.DENIED]
    ).exclude(pk__in=keep)
    if cert.revision is not None:
        old = old.exclude(revision=cert.revision)
    deleted, _ = old.delete()
    return deleted
