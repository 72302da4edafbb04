"""Revocation controller: an ACME revocation asked for (issuance.operations.actions.revoke) is sent to
the CA here, by the worker, then the certificate is renewed with a new key.

Why here and not in the web request: the CA may be slow, paused by a rate limit, or down;
the worker has the backoff for that (TemporaryError, the per-CA pause and outage record),
and a revocation stored as a Pending row is never lost. A pass:

1. Pending row, ACME issuer: revokeCert, signed with the certificate's own key for
   keyCompromise (RFC 8555 §7.6, the proof of compromise CAs ask for) or the account key;
2. the CA's answer is stored with the renewal request in one transaction.

A worker killed between 1 and 2 repeats 1 on the next pass: the CA answers alreadyRevoked,
which counts as done, so the revocation is neither lost nor recorded twice. A refusal (a
problem document other than alreadyRevoked) marks the row Failed with the CA's words; the
certificate keeps its key and nothing is renewed.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.db import transaction
from django.utils import timezone

from issuance.acme import fallback
from issuance.acme.protocol.errors import AcmeProblemError
from issuance.controllers import faults
from issuance.controllers.base import Result
from issuance.models import Certificate, Event, IssuerKind, Revocation, RevocationState
from issuance.observability import events
from issuance.operations import actions
from issuance.pki.encryption import decrypt_text
from issuance.pki.keys import load_stored_private_key

# Key types a JWS can be signed with (RFC 7518: RS256, ES256/384/512); an Ed25519
# certificate key cannot sign an ACME request, so the account key signs instead.
JWS_KEY_TYPES = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)


def reconcile(revocation: Revocation) -> Result:
    if revocation.state != RevocationState.PENDING:
        return Result.done()
    issuer = revocation.issuer
    if issuer.kind != IssuerKind.ACME:
        # Only ACME revocations are left Pending (actions.revoke); nothing to send.
        _finish(revocation, RevocationState.REVOKED, "")
        return Result.done()
    # At the CA that issued it (CA fallback); TemporaryError until the account exists.
    client = fallback.client_of_certificate(issuer, revocation.certificate_pem)
    key_pem, signed_by = _signing_key(revocation)
    try:
        fresh = client.revoke_cert(
            revocation.certificate_pem, revocation.reason_code, cert_key_pem=key_pem
        )
    except AcmeProblemError as exc:
        _finish(revocation, RevocationState.FAILED, f"the CA refused: {exc.describe()}")
        return Result.done()
    faults.checkpoint("revocation-after-ca-call")
    note = f"signed with {signed_by}" + ("" if fresh else "; the CA had already revoked it")
    _finish(revocation, RevocationState.REVOKED, note)
    return Result.done()


def _signing_key(revocation: Revocation) -> tuple[str, str]:
    """(PEM of the certificate's key, or "" for the account key; what signed, in words)."""
    if not revocation.key_ciphertext:
        return "", "the account key"
    pem = decrypt_text(revocation.key_ciphertext)
    if not isinstance(load_stored_private_key(pem), JWS_KEY_TYPES):
        return "", "the account key (the certificate's key type cannot sign a JWS)"
    return pem, "the certificate's own key"


def _finish(revocation: Revocation, state: str, message: str) -> None:
    """Store the outcome, and for a revocation the renewal with a new key, in one write."""
    now = timezone.now()
    with transaction.atomic():
        row = Revocation.objects.select_for_update().get(pk=revocation.pk)
        if row.state != RevocationState.PENDING:
            return  # another pass recorded it first
        row.state = state
        row.message = message
        row.revoked_at = now if state == RevocationState.REVOKED else None
        row.key_ciphertext = ""  # no longer needed: the key is not kept twice
        row.save(update_fields=["state", "message", "revoked_at", "key_ciphertext"])
        revocation.state, revocation.message = row.state, row.message
        revocation.revoked_at, revocation.key_ciphertext = row.revoked_at, ""
        name = row.certificate_name
        if state == RevocationState.REVOKED:
            text = f"Serial {row.serial} revoked at {row.issuer.name} ({row.reason}; {message})"
            events.record(
                "Certificate",
                name,
                "Revoked",
                text,
                type_=Event.WARNING,
                actor=row.requested_by,
                certificate_name=name,
            )
            cert = None
            if row.certificate_id is not None:
                cert = Certificate.objects.select_for_update().filter(pk=row.certificate_id).first()
            if cert is not None:
                actions.renew_after_revocation(cert, row.requested_by, now)
        else:
            events.record(
                "Certificate",
                name,
                "RevocationFailed",
                f"Serial {row.serial} not revoked: {message}",
                type_=Event.WARNING,
                actor=row.requested_by,
                certificate_name=name,
            )
