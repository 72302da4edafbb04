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
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance import backoff, events, faults
from issuance.controllers.base import TemporaryError
from issuance.controllers.certificate_policy import (
    CONTROLLER_USERNAME,
    CertView,
    desired_request_spec,
    key_mismatch,
    next_revision,
    public_key_der,
    request_mismatch,
)
from issuance.models import (
    Certificate,
    CertificateRequest,
    Event,
    RequestState,
    Secret,
    validate_resource_name,
)
from issuance.pki.csr import CSRError, build_csr, parse_csr
from issuance.pki.encryption import DecryptionError
from issuance.pki.keys import KeyError_, generate_private_key, load_private_key, private_key_to_pem
from issuance.pki.x509 import cert_info

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
    "updated_at",
]


def save_status(cert: Certificate) -> None:
    """Only status columns: the API may change spec/generation/renew fields concurrently."""
    cert.save(update_fields=STATUS_FIELDS)


def next_key_pem(cert: Certificate) -> str:
    try:
        return cert.next_private_key
    except DecryptionError:
        return ""


# -- key manager -----------------------------------------------------------------------


def ensure_next_key(view: CertView) -> bool:
    """Make sure a usable next private key is stored. Returns True when it stored one.

    An existing next key that still fits the spec is never replaced: a request may have
    been made with it just before a crash.
    """
    cert = view.cert
    current = next_key_pem(cert)
    if current and not key_mismatch(cert, current):
        return False
    pem = ""
    if cert.rotation_policy == "Never" and view.key_pem and not key_mismatch(cert, view.key_pem):
        pem = view.key_pem
    else:
        try:
            key = generate_private_key(cert.private_key_spec)
        except KeyError_ as exc:
            raise TemporaryError(f"spec.privateKey: {exc}") from None
        encoding = str(cert.private_key_spec.get("encoding") or "PKCS1")
        pem = private_key_to_pem(key, encoding)
    with transaction.atomic():
        locked = Certificate.objects.select_for_update().get(pk=cert.pk)
        stored = next_key_pem(locked)
        if stored and not key_mismatch(cert, stored):
            cert.next_private_key_ciphertext = locked.next_private_key_ciphertext
            cert.next_private_key_created_at = locked.next_private_key_created_at
            return False  # someone stored one meanwhile: keep theirs
        cert.set_next_private_key(pem, view.now)
        save_status(cert)
        events.record(
            "Certificate",
            cert.name,
            "Reused" if pem == view.key_pem else "Generated",
            "Reusing the current private key (rotationPolicy Never)"
            if pem == view.key_pem
            else "Stored a new private key",
            certificate_name=cert.name,
        )
    faults.checkpoint("after-key-stored")
    return True


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
    key_pem = next_key_pem(view.cert)
    if not key_pem:
        return False
    try:
        csr = parse_csr(request.csr_pem)
    except CSRError:
        return False
    return csr.public_key_der == public_key_der(key_pem) and not request_mismatch(
        view.cert, request
    )


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
    key_pem = next_key_pem(cert)
    revision = next_revision(cert)
    csr = build_csr(load_private_key(key_pem), cert.spec)
    spec = {
        "request": csr,
        **desired_request_spec(cert),
        "requester": {"username": CONTROLLER_USERNAME, "source": "certificate"},
    }
    for salt in ("", "retry"):
        try:
            with transaction.atomic():
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
                events.record(
                    "Certificate",
                    cert.name,
                    "Requested",
                    f"Created new CertificateRequest {request.name} (revision {revision})",
                    certificate_name=cert.name,
                )
                transaction.on_commit(_notify)
        except IntegrityError:
            existing = CertificateRequest.objects.filter(certificate=cert, revision=revision)
            if existing.exists():
                return None  # another worker made it; the next pass picks it up
            continue  # the name is taken by an unrelated request: try a salted one
        faults.checkpoint("after-request-created")
        return request
    raise TemporaryError(f"cannot name a CertificateRequest for revision {revision}")


def _notify() -> None:
    from issuance.wakeup import notify_workers

    notify_workers()


def finished_at(request: CertificateRequest) -> datetime | None:
    """When the request reached its final state (None while it is in flight)."""
    if not request.is_final:
        return None
    if request.failure_time is not None:
        return request.failure_time
    cond = request.get_condition("Ready") or {}
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


def record_outcome(view: CertView) -> bool:
    """The target request reached a final state: store the new revision or the failure.

    Returns True when something was recorded.
    """
    cert, target = view.cert, view.target
    if target is None or not target.is_final or not target_matches(view, target):
        return False
    if failure_recorded(cert, target):
        return False
    if target.state == RequestState.ISSUED:
        return _store_issued(view, target)
    cond = target.get_condition("Ready") or {}
    reason = "Denied" if target.state == RequestState.DENIED else "Failed"
    record_failure(cert, view.now, reason, str(cond.get("message") or target.state), target)
    return True


def record_failure(
    cert: Certificate,
    now: datetime,
    reason: str,
    message: str,
    request: CertificateRequest | None = None,
) -> None:
    """A failed issuance: count it, back off (seed 004), keep the next key for the retry."""
    with transaction.atomic():
        done = finished_at(request) if request is not None else None
        failed_at = max(now, done) if done is not None else now
        attempts = (cert.failed_issuance_attempts or 0) + 1
        cert.failed_issuance_attempts = attempts
        cert.last_failure_time = failed_at
        cert.last_failure_generation = cert.generation
        cert.next_retry_time = backoff.next_retry_time(failed_at, attempts)
        text = f"The certificate request has failed to complete and will be retried: {message}"
        cert.set_condition("Issuing", "False", reason, text, now=now)
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


def _store_issued(view: CertView, request: CertificateRequest) -> bool:
    cert = view.cert
    key_pem = next_key_pem(cert)
    try:
        issued = cert_info(request.certificate_pem)
    except ValueError as exc:
        record_failure(
            cert, view.now, "Failed", f"issued certificate is unreadable: {exc}", request
        )
        return True
    if issued.public_key_der != public_key_der(key_pem):
        record_failure(
            cert,
            view.now,
            "Failed",
            f"the certificate in {request.name} does not match the private key it was "
            "requested with",
            request,
        )
        return True
    with transaction.atomic():
        secret = Secret.objects.select_for_update().filter(name=cert.secret_name).first()
        if secret is None:
            secret = Secret(name=cert.secret_name)
        elif secret.certificate_id not in (None, cert.pk):
            raise TemporaryError(
                f"secret {cert.secret_name!r} belongs to another certificate; not overwriting it"
            )
        secret.tls_crt = request.certificate_pem
        secret.ca_crt = request.ca_pem
        secret.tls_key = key_pem
        secret.certificate = cert
        secret.save()
        cert.revision = request.revision
        cert.set_next_private_key("", view.now)
        cert.failed_issuance_attempts = None
        cert.last_failure_time = None
        cert.last_failure_generation = None
        cert.next_retry_time = None
        cert.not_before = issued.not_before
        cert.not_after = issued.not_after
        cert.remove_condition("Issuing")
        save_status(cert)
        events.record(
            "Certificate",
            cert.name,
            "Issued",
            f"The certificate has been successfully issued (revision {request.revision}, "
            f"serial {issued.serial_number})",
            certificate_name=cert.name,
        )
    faults.checkpoint("after-secret-written")
    return True


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
