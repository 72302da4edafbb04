"""What a Certificate currently has versus what its spec asks for (cert-manager's policy checks).

Used by readiness (Ready=False reasons), by the trigger (why a new issuance starts) and by
the request manager (is the in-flight request still what the spec asks for?).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

from django.db.models import Q, QuerySet, Subquery

from issuance.fastpaths.compiled_query import compiled
from issuance.models import Certificate, CertificateRequest, Issuer, Secret
from issuance.pki.csr import CSRError, CSRInfo, name_constraints, parse_csr
from issuance.pki.keys import KeyError_, PassKeys, StoredKey, key_matches_spec
from issuance.pki.x509 import CertInfo, cert_info
from issuance.shapes import CertificateRequestSpec, CertificateSpec, IssuerRef, NameConstraintsSpec
from issuance.timing.durations import DurationError, parse_duration
from issuance.timing.renewal import first_in_windows, renewal_disabled, renewal_time, windows_of

DEFAULT_DURATION = "2160h"
CONTROLLER_USERNAME = "system:certificate-controller"


@dataclass(frozen=True)
class Violation:
    """Why the stored certificate is not (or no longer) what the spec asks for."""

    reason: str  # cert-manager's words: DoesNotExist, SecretMismatch, IncorrectIssuer, ...
    message: str


@dataclass
class CertView:
    """Everything the certificate steps read, loaded once per reconcile."""

    cert: Certificate
    now: datetime
    secret: Secret | None
    info: CertInfo | None  # the leaf stored in the Secret, when it parses
    key: StoredKey | None  # the Secret's private key; None when missing or undecryptable
    current: CertificateRequest | None  # the request that made the current revision
    target: CertificateRequest | None  # the newest request after the current revision
    latest: CertificateRequest | None  # the newest request of all (for forced renewals)
    # secret_violation()'s answer once worked out (it parses keys and the CSR); a view made
    # with dataclasses.replace() must reset it.
    checked: tuple[Violation | None] | None = None
    # The stored keys this pass has decrypted and parsed (each at most once); shared by the
    # views a pass makes with dataclasses.replace(), dropped when the pass ends.
    keys: PassKeys = field(default_factory=PassKeys)

    def next_key(self) -> StoredKey | None:
        """The Certificate's stored next private key (None: none, or undecryptable)."""
        return self.keys.get(self.cert.next_private_key_ciphertext)


# Stand-ins for the precompiled queries of load_view: values no row has, yet within each
# column's range (Django compiles an out-of-range integer lookup away as "never true").
_NAME = "\x00secret-name"
_CERT_PK = 9_007_199_254_740_993
_REVISION = 2_147_483_001


def _secret_query(name: str) -> QuerySet[Secret]:
    return Secret.objects.filter(name=name).order_by()[:1]


def _requests_query(cert_pk: int, revision: int | None = None) -> QuerySet[CertificateRequest]:
    """The current and the newest request in one query (usually the same row)."""
    newest = (
        CertificateRequest.objects.filter(certificate_id=cert_pk)
        .order_by("-revision")
        .values("revision")[:1]
    )
    wanted = Q(revision=Subquery(newest))
    if revision is not None:
        wanted |= Q(revision=revision)
    return (
        CertificateRequest.objects.filter(wanted, certificate_id=cert_pk)
        .select_related("issuer")
        .order_by("-revision")
    )


def load_view(cert: Certificate, now: datetime) -> CertView:
    # Run every reconcile pass of every Certificate: compiled once per thread (the ORM spent
    # more CPU building these statements than the database spent answering them).
    found = compiled("load_view.secret", _secret_query, _NAME).fetch(cert.secret_name)
    secret = cast(Secret, found[0]) if found else None
    if secret is not None and secret.certificate_id not in (None, cert.pk):
        secret = None  # someone else's Secret: not ours to read
    keys = PassKeys()
    info = None
    key = None
    if secret is not None:
        try:
            info = cert_info(secret.tls_crt) if secret.tls_crt else None
        except ValueError:
            info = None
        key = keys.get(secret.tls_key_ciphertext)
    if cert.revision is None:
        query = compiled("load_view.requests", _requests_query, _CERT_PK)
        rows = cast(list[CertificateRequest], query.fetch(cert.pk))
    else:
        query = compiled("load_view.requests+current", _requests_query, _CERT_PK, _REVISION)
        rows = cast(list[CertificateRequest], query.fetch(cert.pk, cert.revision))
    latest = rows[0] if rows else None
    current = None
    if cert.revision is not None:
        current = next((r for r in rows if r.revision == cert.revision), None)
    target = (
        latest if latest is not None and (latest.revision or 0) > (cert.revision or 0) else None
    )
    return CertView(cert, now, secret, info, key, current, target, latest, keys=keys)


def desired_request_spec(cert: Certificate) -> CertificateRequestSpec:
    """The request fields the spec asks for (without the CSR itself)."""
    spec = cert.typed_spec
    ref = spec.get("issuerRef")
    issuer_ref: IssuerRef = ref.copy() if ref else {"name": cert.issuer.name, "kind": "Issuer"}
    return {
        "issuerRef": issuer_ref,
        "duration": str(spec.get("duration") or DEFAULT_DURATION),
        "usages": list(spec.get("usages") or []),
        "isCA": bool(spec.get("isCA")),
    }


def _ips(values: list[str]) -> set[str]:
    out = set()
    for value in values:
        try:
            out.add(str(ipaddress.ip_address(value)))
        except ValueError:
            out.add(value)
    return out


def _organizations(cert: Certificate) -> list[str]:
    return list((cert.typed_spec.get("subject") or {}).get("organizations") or [])


def csr_mismatch(cert: Certificate, csr: CSRInfo) -> str:
    """How a CSR differs from the spec's names and key type ("" when it matches)."""
    spec = cert.typed_spec
    if sorted(set(csr.dns_names)) != sorted(set(cert.dns_names)):
        return f"dnsNames differ: requested {sorted(csr.dns_names)}, spec {sorted(cert.dns_names)}"
    if _ips(csr.ip_addresses) != _ips(cert.ip_addresses):
        return "ipAddresses differ from the spec"
    if csr.common_name != cert.common_name:
        return f"commonName differs: {csr.common_name!r} != {cert.common_name!r}"
    if sorted(set(csr.uris)) != sorted(set(spec.get("uris") or [])):
        return "uris differ from the spec"
    if sorted(set(csr.emails)) != sorted(set(spec.get("emailAddresses") or [])):
        return "emailAddresses differ from the spec"
    if sorted(csr.organizations) != sorted(_organizations(cert)):
        return "subject.organizations differ from the spec"
    wanted = sorted((o["oid"], o["utf8Value"]) for o in spec.get("otherNames") or [])
    if sorted(csr.other_names) != wanted:
        return "otherNames differ from the spec"
    return _name_constraints_mismatch(spec.get("nameConstraints"), csr)


def _name_constraints_mismatch(wanted: NameConstraintsSpec | None, csr: CSRInfo) -> str:
    want = None
    if wanted:
        want = (name_constraints(wanted).public_bytes(), bool(wanted.get("critical")))
    return "" if csr.name_constraints == want else "nameConstraints differ from the spec"


def _duration(value: object) -> object:
    """Compare durations by value, so `2160h` and `2160h0m0s` are the same request."""
    try:
        return parse_duration(str(value or DEFAULT_DURATION))
    except DurationError:
        return value


def request_mismatch(cert: Certificate, request: CertificateRequest) -> str:
    """How an existing request differs from what the spec asks for now ("" when it matches)."""
    if request.issuer_id != cert.issuer_id:
        return f"issuer changed from {request.issuer.name} to {cert.issuer.name}"
    want = desired_request_spec(cert)
    have = request.typed_spec
    if _duration(have.get("duration")) != _duration(want["duration"]):
        return "spec.duration changed"
    if sorted(set(have.get("usages") or [])) != sorted(set(want["usages"])):
        return "spec.usages changed"
    if bool(have.get("isCA")) != want["isCA"]:
        return "spec.isCA changed"
    try:
        csr = parse_csr(request.csr_pem)
    except CSRError as exc:
        return f"stored CSR is invalid: {exc}"
    return csr_mismatch(cert, csr)


def key_mismatch(cert: Certificate, key: StoredKey) -> str:
    if key.key is None:
        return "private key cannot be read"
    try:
        if not key_matches_spec(key.key, cert.private_key_spec):
            return "private key type or size differs from spec.privateKey"
    except KeyError_ as exc:
        return str(exc)
    return ""


def secret_violation(view: CertView) -> Violation | None:
    """Why the stored key pair does not serve the spec (None: it does, maybe needing renewal)."""
    if view.checked is None:
        view.checked = (_secret_violation(view),)
    return view.checked[0]


def _secret_violation(view: CertView) -> Violation | None:
    cert, secret, info = view.cert, view.secret, view.info
    if secret is None:
        return Violation("DoesNotExist", f"Secret {cert.secret_name!r} does not exist")
    key = view.key
    if not secret.tls_crt or key is None or not key.pem:
        return Violation("MissingData", f"Secret {cert.secret_name!r} lacks tls.crt or tls.key")
    if info is None:
        return Violation("InvalidCertificate", "tls.crt in the Secret cannot be parsed")
    if key.key is None:
        return Violation("InvalidKeyPair", "tls.key cannot be read")
    if key.public_der != info.public_key_der:
        return Violation("InvalidKeyPair", "tls.key does not match tls.crt")
    if info.not_after <= view.now:
        return Violation("Expired", f"Certificate expired on {info.not_after.isoformat()}")
    why = key_mismatch(cert, key)
    if why:
        return Violation("SecretMismatch", why)
    if view.current is not None:
        why = request_mismatch(cert, view.current)
        if why:
            reason = "IncorrectIssuer" if why.startswith("issuer changed") else "RequestChanged"
            return Violation(reason, why)
    else:
        # No request on record (deleted, or imported Secret): compare the certificate itself,
        # leniently, since a CA may add the commonName to the SANs.
        want = set(cert.dns_names)
        have = set(info.dns_names)
        if not want <= have or not have <= want | {cert.common_name}:
            return Violation("SecretMismatch", "dnsNames in the certificate differ from the spec")
        if _ips(info.ip_addresses) != _ips(cert.ip_addresses):
            return Violation("SecretMismatch", "ipAddresses in the certificate differ")
        if cert.common_name and info.common_name != cert.common_name:
            return Violation("SecretMismatch", "commonName in the certificate differs")
    return None


def renew_before_percentage(cert: Certificate) -> int | None:
    value = cert.typed_spec.get("renewBeforePercentage")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def compute_renewal_time(cert: Certificate, info: CertInfo) -> datetime | None:
    """When the current certificate renews: the formula (or the CA's ARI choice), moved to
    the first instant inside a renewal window; None with `spec.renewal.policy: Disabled` (or
    windows that never open)."""
    renewal = cert.typed_spec.get("renewal")
    if renewal_disabled(renewal):
        return None
    ari = cert.ari_renewal_time
    if ari is not None and cert.ari_checked_at is None and not info.not_before <= ari:
        ari = None  # a suggestion stored before polling existed, for an older revision
    if ari is not None and ari >= info.not_after:
        ari = None  # a CA suggesting renewal after expiry: the formula is safer
    renew_before = cert.typed_spec.get("renewBefore")
    try:
        if renew_before:
            parse_duration(str(renew_before))
    except DurationError:
        renew_before = None
    when = renewal_time(
        cert.name,
        info.not_before,
        info.not_after,
        str(renew_before) if renew_before else None,
        renew_before_percentage(cert),
        ari_suggested=ari,
    )
    return first_in_windows(when, windows_of(renewal))


def until(moment: datetime, now: datetime) -> timedelta:
    return max(moment - now, timedelta(0))


# -- what a spec change would do ------------------------------------------------------------


@dataclass(frozen=True)
class Forecast:
    """What the trigger would decide if the Certificate's spec became a new one."""

    violation: Violation | None  # why a new certificate would be issued (the trigger's reason)
    already: Violation | None  # what the stored certificate already lacks, under the old spec
    renewal_before: datetime | None  # the renewal time now, and under the new spec
    renewal_after: datetime | None

    @property
    def reissues(self) -> bool:
        return self.violation is not None


def forecast(cert: Certificate, spec: CertificateSpec, issuer: Issuer, now: datetime) -> Forecast:
    """Run the trigger's own checks on an unsaved copy of `cert` carrying `spec`: the stored
    key pair against the new spec (secret_violation, as the certificates controller does in
    each pass) and, when it still serves, whether the renewal time moves to now or earlier
    (the trigger's "Renewing"). The console's edit preview calls this; it is not a second
    copy of the rule."""
    candidate = Certificate(
        pk=cert.pk,
        name=cert.name,
        spec=spec,
        issuer=issuer,
        secret_name=spec.get("secretName") or cert.secret_name,
        revision=cert.revision,
        renewal_time=cert.renewal_time,
        ari_renewal_time=cert.ari_renewal_time,
        ari_checked_at=cert.ari_checked_at,
    )
    view = load_view(candidate, now)
    violation = secret_violation(view)
    already = secret_violation(load_view(cert, now))
    after = compute_renewal_time(candidate, view.info) if view.info is not None else None
    if violation is None and after is not None and after <= now:
        violation = Violation("Renewing", f"the renewal time moves to {after.isoformat()}, due now")
    return Forecast(violation, already, cert.renewal_time, after)
