"""CA issuer kind: sign with a CA key pair stored in a Secret (cert-manager's `ca` issuer).

A missing or broken key pair is temporary (someone may fix the Secret): signing raises
TemporaryError and the Issuer controller reports Ready=False with reason ErrGetKeyPair.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from django.utils import timezone

from issuance.controllers.base import TemporaryError
from issuance.issuers.base import SignOutcome, SignState
from issuance.issuers.local import SigningError, shortened, signing_duration
from issuance.models import CertificateRequest, Issuer, IssuerKind, RequestState, Secret
from issuance.pki.csr import CSRError, build_csr
from issuance.pki.keys import generate_private_key, load_stored_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.pki.x509 import load_leaf, split_pem_chain
from issuance.worker.wakeup import wake

GENERATED_CA_DURATION = timedelta(days=3650)
CA_RETRY = timedelta(seconds=30)


class CAKeyPairError(Exception):
    """The CA Secret is missing or does not hold a usable CA key pair."""


@dataclass(frozen=True)
class CAKeyPair:
    key: CertificateIssuerPrivateKeyTypes
    chain: list[str]  # the CA certificate first, then its own issuers
    ca_pem: str  # the root of the chain (what clients should trust)
    subject: str


def secret_name(issuer: Issuer) -> str:
    return str(issuer.ca_spec.get("secretName") or "")


def load_keypair(issuer: Issuer) -> CAKeyPair:
    name = secret_name(issuer)
    if not name:
        raise CAKeyPairError("spec.ca.secretName is not set")
    secret = Secret.objects.filter(name=name).first()
    if secret is None:
        raise CAKeyPairError(f"secret {name!r} does not exist")
    chain = split_pem_chain(secret.tls_crt)
    if not chain:
        raise CAKeyPairError(f"secret {name!r} has no tls.crt certificate")
    try:
        cert = load_leaf(secret.tls_crt)
    except ValueError as exc:
        raise CAKeyPairError(
            f"secret {name!r}: tls.crt is not a valid certificate: {exc}"
        ) from None
    try:
        # Every key in a Secret was generated here or checked in full when it entered
        # (specs.issuer validates an inline ca.privateKey): the stored door.
        key = load_stored_private_key(secret.tls_key)
    except (ValueError, TypeError) as exc:
        raise CAKeyPairError(
            f"secret {name!r}: tls.key is not a valid private key: {exc}"
        ) from None
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise CAKeyPairError(f"secret {name!r}: tls.crt is not a CA certificate (isCA false)")
    if cert.public_key() != key.public_key():
        raise CAKeyPairError(f"secret {name!r}: tls.key does not match tls.crt")
    if cert.not_valid_after_utc <= timezone.now():
        raise CAKeyPairError(f"secret {name!r}: the CA certificate has expired")
    ca_blocks = split_pem_chain(secret.ca_crt)
    ca_pem = ca_blocks[-1] if ca_blocks else chain[-1]
    return CAKeyPair(key=key, chain=chain, ca_pem=ca_pem, subject=cert.subject.rfc4514_string())


def generate_keypair(issuer: Issuer) -> Secret | None:
    """`spec.ca.generate: true` (our extension): create the CA Secret once if it is missing.

    Returns the new Secret, or None when it already existed (never overwritten).
    """
    from django.db import IntegrityError, transaction

    name = secret_name(issuer)
    if not name or Secret.objects.filter(name=name).exists():
        return None
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    common_name = str(issuer.ca_spec.get("commonName") or issuer.name)
    csr = build_csr(key, {"commonName": common_name})
    pem = sign_csr(csr, key, None, duration=GENERATED_CA_DURATION, now=timezone.now(), is_ca=True)
    secret = Secret(name=name, tls_crt=pem, ca_crt=pem)
    secret.tls_key = private_key_to_pem(key)
    try:
        with transaction.atomic():
            secret.save()
    except IntegrityError:
        return None  # someone else created it meanwhile: theirs wins
    return secret


def wake_readers(secret: str) -> None:
    """A CA certificate was written into `secret`: the CA Issuers that read it, and their
    requests waiting for it, look now rather than at their next recheck (CA_RETRY,
    CA_NOT_READY_RECHECK), so a CA bootstrapped by a Certificate signs as soon as it exists."""
    for issuer in Issuer.objects.filter(kind=IssuerKind.CA, spec__ca__secretName=secret):
        wake(issuer)
        waiting = CertificateRequest.objects.filter(issuer=issuer, state=RequestState.PENDING)
        for request in waiting.only("pk"):
            wake(request)


def sign(request: CertificateRequest) -> SignOutcome:
    issuer = request.issuer
    try:
        pair = load_keypair(issuer)
    except CAKeyPairError as exc:
        raise TemporaryError(f"ErrGetKeyPair: {exc}", delay=CA_RETRY) from None
    now = timezone.now()
    try:
        duration = signing_duration(request, issuer)
        leaf = sign_csr(
            request.csr_pem,
            pair.key,
            pair.chain[0],
            duration=duration,
            now=now,
            usages=list(request.typed_spec.get("usages") or []) or _default_usages(),
            is_ca=bool(request.typed_spec.get("isCA")),
            crl_urls=crl_urls(issuer),
        )
    except (SigningError, CSRError, ValueError) as exc:
        return SignOutcome(SignState.FAILED, reason="SigningError", message=str(exc))
    ca_not_after = x509.load_pem_x509_certificate(pair.chain[0].encode()).not_valid_after_utc
    return SignOutcome(
        SignState.ISSUED,
        certificate_pem=leaf + "".join(pair.chain),
        ca_pem=pair.ca_pem,
        shortened=shortened(request, issuer, now, ca_not_after),
    )


def crl_urls(issuer: Issuer) -> list[str]:
    """`spec.ca.crlDistributionPoint` (validated as an http(s) URL by specs.issuer)."""
    url = issuer.ca_spec.get("crlDistributionPoint", "")
    return [url] if url else []


def _default_usages() -> list[str]:
    from issuance.pki.signing import DEFAULT_USAGES

    return list(DEFAULT_USAGES)
