"""What people do to resources (API, CLI and web UI all call these): renew, revoke, approve,
deny, delete; and renew or delete many certificates at once (the console's bulk actions)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from issuance.fastpaths.model_save import save_where
from issuance.models import (
    REASONS,
    Approval,
    Certificate,
    CertificateRequest,
    Event,
    Issuer,
    IssuerKind,
    Revocation,
    RevocationState,
    Secret,
)
from issuance.observability import events, publish
from issuance.operations import tree_locks
from issuance.pki.x509 import CertInfo, cert_info
from issuance.worker.wakeup import wake, woken


class ActionError(Exception):
    """The action does not apply to the object in its current state (→ 409)."""


@transaction.atomic
def force_renew(certificate: Certificate, actor: str) -> Certificate:
    """Issue now, bypassing renewal time and failure backoff; recorded with who and when."""
    cert = Certificate.objects.select_for_update().get(pk=certificate.pk)
    now = timezone.now()
    cert.renew_requested_at = now
    cert.renew_requested_by = actor
    cert.save(update_fields=["renew_requested_at", "renew_requested_by", "updated_at"])
    events.record(
        "Certificate",
        cert.name,
        "ManuallyTriggered",
        _renew_message(cert.next_retry_time),
        actor=actor,
        certificate_name=cert.name,
    )
    wake(cert)
    return cert


def _renew_message(next_retry_time: datetime | None) -> str:
    return "Force renewal requested" + (" during failure backoff" if next_retry_time else "")


def _missing(name: str) -> str:
    return f"no certificate named {name!r} (deleted meanwhile?)"


@transaction.atomic
def force_renew_many(names: Sequence[str], actor: str) -> dict[str, str]:
    """force_renew for many certificates in a constant number of statements (one UPDATE
    that also wakes them, one INSERT of the timeline entries). Returns name -> error
    ("" when done); a name with no certificate is an error, not an exception."""
    rows = Certificate.objects.select_for_update().filter(name__in=list(names))
    found = dict(rows.values_list("name", "next_retry_time"))
    if found:
        now = timezone.now()
        Certificate.objects.filter(name__in=list(found)).update(
            renew_requested_at=now,
            renew_requested_by=actor,
            updated_at=now,
            due_at=now,
            wake_seq=F("wake_seq") + 1,
        )
        woken()
        publish.bulk_updated("Certificate")  # an UPDATE sends no post_save
        events.write(
            [
                events.entry(
                    "Certificate",
                    name,
                    "ManuallyTriggered",
                    _renew_message(retry),
                    actor=actor,
                    certificate_name=name,
                )
                for name, retry in found.items()
            ]
        )
    return {name: "" if name in found else _missing(name) for name in names}


def delete_certificates(
    names: Sequence[str], actor: str, *, delete_secrets: bool = False
) -> dict[str, str]:
    """Delete certificates (their requests, orders and challenges go with them). The Secret
    (the stored key pair) is kept unless `delete_secrets`; only a Secret that belongs to the
    certificate (or to none) is deleted. Returns name -> error ("" when done), in a constant
    number of statements per attempt. Safe beside a running worker: the locks are taken
    without waiting (operations/tree_locks.py), so a delete never deadlocks with issuance."""
    try:
        return tree_locks.without_waiting(
            lambda: _delete_certificates(names, actor, delete_secrets)
        )
    except tree_locks.Contended as exc:
        raise ActionError(f"the certificates are busy, try again: {exc}") from None


def _delete_certificates(names: Sequence[str], actor: str, delete_secrets: bool) -> dict[str, str]:
    certs = tree_locks.lock_trees(names)
    deleted_secrets: set[str] = set()
    if delete_secrets and certs:
        secrets = Secret.objects.filter(
            Q(certificate__in=certs) | Q(certificate__isnull=True),
            name__in=[c.secret_name for c in certs],
        )
        deleted_secrets = set(secrets.values_list("name", flat=True))
        secrets.delete()
    if certs:
        Certificate.objects.filter(pk__in=[c.pk for c in certs]).delete()
        events.write(
            [
                events.entry(
                    "Certificate",
                    c.name,
                    "Deleted",
                    f"Certificate deleted (secret {c.secret_name!r} "
                    + ("deleted)" if c.secret_name in deleted_secrets else "is kept)"),
                    actor=actor,
                    certificate_name=c.name,
                )
                for c in certs
            ]
        )
    done = {c.name for c in certs}
    return {name: "" if name in done else _missing(name) for name in names}


def delete_certificate(
    certificate: Certificate, actor: str, *, delete_secret: bool = False
) -> None:
    """Delete one certificate (API and console); ActionError if it is already gone."""
    error = delete_certificates([certificate.name], actor, delete_secrets=delete_secret)[
        certificate.name
    ]
    if error:
        raise ActionError(error)


def revoke(certificate: Certificate, reason: str, actor: str) -> Revocation:
    """Revoke the certificate's issued leaf with an RFC 5280 reason, then renew with a new key.

    ACME issuers: the revokeCert call is made by the worker (controllers/revocations.py),
    not here: a web request must not wait on a CA that may be slow, paused or down, and the
    worker retries temporary failures and, after a crash, repeats the call (the CA's
    alreadyRevoked counts as done), so a revocation asked for is neither lost nor sent
    twice from two places. The row is stored (Pending) and woken in one transaction.
    CA issuers: nothing outside to call: the revocation is recorded (Revoked) and the CRL
    at /crl/<issuer>.crl lists it; the renewal is requested at once.
    """
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {', '.join(REASONS)}")
    with transaction.atomic():
        cert = (
            Certificate.objects.select_for_update().select_related("issuer").get(pk=certificate.pk)
        )
        secret, info = _issued_leaf(cert)
        issuer = _issuer_of(cert)
        if issuer.kind == IssuerKind.SELF_SIGNED:
            raise ActionError(
                f"Certificate {cert.name} is self-signed: there is no CA to revoke it at "
                "(delete or renew it instead)"
            )
        existing = _earlier_revocation(cert, issuer, info)
        now = timezone.now()
        acme = issuer.kind == IssuerKind.ACME
        revocation = Revocation(
            issuer=issuer,
            certificate=cert,
            certificate_name=cert.name,
            serial=info.serial_number,
            reason=reason,
            not_after=info.not_after,
            certificate_pem=secret.tls_crt if acme else "",
            # The Secret's own ciphertext: the key stays encrypted at rest, as in the Secret.
            key_ciphertext=secret.tls_key_ciphertext if acme and reason == "keyCompromise" else "",
            state=RevocationState.PENDING if acme else RevocationState.REVOKED,
            requested_by=actor,
            requested_at=now,
            revoked_at=None if acme else now,
            due_at=now if acme else None,
        )
        if existing is not None:
            # The CA refused last time: the same row (one per serial, ever) is asked again.
            revocation.pk = existing.pk
        _store_revocation(revocation, cert)
        _record_revocation(revocation, cert, issuer, acme, actor)
        if acme:
            wake(revocation)
        else:
            renew_after_revocation(cert, actor, now)
    return revocation


def _issued_leaf(cert: Certificate) -> tuple[Secret, CertInfo]:
    """The certificate's stored Secret and what its leaf says; ActionError without one."""
    secret = Secret.objects.filter(name=cert.secret_name).first()
    if secret is None or not secret.tls_crt:
        raise ActionError(f"Certificate {cert.name} has no issued certificate to revoke")
    try:
        return secret, cert_info(secret.tls_crt)
    except ValueError as exc:
        raise ActionError(f"the stored certificate of {cert.name} is unreadable: {exc}") from None


def _earlier_revocation(cert: Certificate, issuer: Issuer, info: CertInfo) -> Revocation | None:
    """A failed earlier revocation of this serial (asked again), locked; ActionError while
    one is pending or done."""
    existing = (
        Revocation.objects.select_for_update()
        .filter(issuer=issuer, serial=info.serial_number)
        .first()
    )
    if existing is not None and existing.state != RevocationState.FAILED:
        raise ActionError(
            f"serial {info.serial_number} of {cert.name} is already {existing.state.lower()}"
            f" ({existing.reason}, by {existing.requested_by or '?'})"
        )
    return existing


def _store_revocation(revocation: Revocation, cert: Certificate) -> None:
    try:
        with transaction.atomic():
            revocation.save()
    except IntegrityError:
        raise ActionError(
            f"serial {revocation.serial} of {cert.name} is already being revoked"
        ) from None


def _record_revocation(
    revocation: Revocation, cert: Certificate, issuer: Issuer, acme: bool, actor: str
) -> None:
    where = f"at {issuer.name}" if acme else f"in the CRL of {issuer.name}"
    events.record(
        "Certificate",
        cert.name,
        "RevocationRequested" if acme else "Revoked",
        f"Revocation of serial {revocation.serial} ({revocation.reason}) "
        + ("requested " + where if acme else "recorded " + where),
        type_=Event.WARNING,
        actor=actor,
        certificate_name=cert.name,
    )


def renew_after_revocation(cert: Certificate, actor: str, now: datetime) -> None:
    """A forced renewal whose key is new: the current Secret's key is never reused, even with
    rotationPolicy Never (controllers/issuing.py checks the Revocation rows); a next key
    stored before the revocation is dropped unless a request was already made with it."""
    cert.renew_requested_at = now
    cert.renew_requested_by = actor
    cert.save(update_fields=["renew_requested_at", "renew_requested_by", "updated_at"])
    events.record(
        "Certificate",
        cert.name,
        "ManuallyTriggered",
        "Renewal with a new private key requested after revocation",
        actor=actor,
        certificate_name=cert.name,
    )
    wake(cert)


def _issuer_of(cert: Certificate) -> Issuer:
    """The issuer that signed the current revision (the spec's issuerRef may have moved)."""
    if cert.revision is not None:
        request = (
            CertificateRequest.objects.filter(certificate=cert, revision=cert.revision)
            .select_related("issuer")
            .first()
        )
        if request is not None:
            return request.issuer
    return cert.issuer


DECISION_FIELDS = ("approval", "decided_by", "decided_at", "conditions", "updated_at")


def _set_decision(
    cr: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> None:
    now = timezone.now()
    cr.approval = decision
    cr.decided_by = actor
    cr.decided_at = now
    cr.set_condition(decision, "True", reason, message, now=now, decidedBy=actor)


def _decide(
    request: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> CertificateRequest:
    cr: CertificateRequest = CertificateRequest.objects.select_for_update().get(pk=request.pk)
    if cr.approval != Approval.PENDING:
        raise ActionError(
            f"CertificateRequest {cr.name} is already {cr.approval}"
            f" by {cr.decided_by or 'policy'}; approval and denial are final"
        )
    _set_decision(cr, decision, actor, reason, message)
    cr.save(update_fields=list(DECISION_FIELDS))
    _record_decision(cr, decision, actor, reason, message)
    wake(cr)
    return cr


def approve_pending(request: CertificateRequest, actor: str, reason: str, message: str) -> bool:
    """Approve a request the caller is reconciling, if nobody decided first.

    For the worker's approver: one conditional UPDATE instead of a lock and a save, and no
    wake-up (the caller goes on to sign in the same pass). When a person decided first,
    `request` is reloaded with their decision and False returned.
    """
    _set_decision(request, Approval.APPROVED, actor, reason, message)
    using = request._state.db or DEFAULT_DB_ALIAS
    if not save_where(request, DECISION_FIELDS, using, approval=Approval.PENDING):
        request.refresh_from_db()
        return False
    _record_decision(request, Approval.APPROVED, actor, reason, message)
    return True


def _record_decision(
    cr: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> None:
    events.record(
        "CertificateRequest",
        cr.name,
        decision,
        f"{reason}: {message}" if message else reason,
        type_=Event.NORMAL if decision == Approval.APPROVED else Event.WARNING,
        actor=actor,
        certificate_name=cr.certificate.name if cr.certificate_id and cr.certificate else "",
    )


@transaction.atomic
def approve(
    request: CertificateRequest, actor: str, reason: str = "Approved", message: str = ""
) -> CertificateRequest:
    return _decide(request, Approval.APPROVED, actor, reason or "Approved", message)


@transaction.atomic
def deny(
    request: CertificateRequest, actor: str, reason: str = "Denied", message: str = ""
) -> CertificateRequest:
    return _decide(request, Approval.DENIED, actor, reason or "Denied", message)
