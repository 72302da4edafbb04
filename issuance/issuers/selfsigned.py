"""selfSigned issuer kind: the certificate is signed with its own private key.

The issuer therefore needs the private key, which only Certificates owned here have (their
next private key). An external CSR sent to a selfSigned issuer fails, as in cert-manager.
"""

from __future__ import annotations

from django.utils import timezone

from issuance.issuers.base import SignOutcome, SignState
from issuance.issuers.local import SigningError, shortened, signing_duration
from issuance.models import CertificateRequest
from issuance.pki.csr import CSRError, parse_csr
from issuance.pki.encryption import DecryptionError
from issuance.pki.keys import load_stored_private_key, public_key_bytes
from issuance.pki.signing import DEFAULT_USAGES, sign_csr


def sign(request: CertificateRequest) -> SignOutcome:
    cert = request.certificate
    if cert is None:
        return SignOutcome(
            SignState.FAILED,
            reason="NoPrivateKey",
            message="a selfSigned issuer signs with the certificate's own private key, which "
            "only Certificates managed here have; external CSRs need a ca or acme issuer",
        )
    try:
        key_pem = cert.next_private_key
    except DecryptionError as exc:
        return SignOutcome(SignState.FAILED, reason="NoPrivateKey", message=str(exc))
    if not key_pem:
        return SignOutcome(
            SignState.FAILED,
            reason="NoPrivateKey",
            message=f"Certificate {cert.name} has no pending private key for this request",
        )
    try:
        key = load_stored_private_key(key_pem)
        if parse_csr(request.csr_pem).public_key_der != public_key_bytes(key.public_key()):
            return SignOutcome(
                SignState.FAILED,
                reason="NoPrivateKey",
                message="the CSR was not made with the certificate's pending private key",
            )
        now = timezone.now()
        pem = sign_csr(
            request.csr_pem,
            key,
            None,
            duration=signing_duration(request, request.issuer),
            now=now,
            usages=list(request.typed_spec.get("usages") or DEFAULT_USAGES),
            is_ca=bool(request.typed_spec.get("isCA")),
        )
    except (SigningError, CSRError, ValueError) as exc:
        return SignOutcome(SignState.FAILED, reason="SigningError", message=str(exc))
    # A self-signed certificate is its own CA.
    return SignOutcome(
        SignState.ISSUED,
        certificate_pem=pem,
        ca_pem=pem,
        shortened=shortened(request, request.issuer, now),
    )
