"""Issuer specs: cert-manager's Issuer/ClusterIssuer spec (acme, ca, selfSigned) + extensions.

Extensions: `ca.generate` (+`ca.commonName`) makes a CA key pair when the Secret is
missing; `ca.certificate` + `ca.privateKey` (inline PEM) are moved into a Secret;
`ca.maxDuration` / `selfSigned.maxDuration` cap what is signed; `approvalPolicy`
decides which CertificateRequests are approved automatically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from cryptography import x509
from django.db import transaction
from django.utils import timezone

from issuance.acme.issuer_spec import validate_acme
from issuance.approval import spec as approval_spec
from issuance.models import Issuer, IssuerKind
from issuance.observability import events
from issuance.pki.csr import build_csr
from issuance.pki.keys import (
    InvalidPrivateKey,
    generate_private_key,
    private_key_to_pem,
    public_key_bytes,
    validate_private_key,
)
from issuance.pki.signing import sign_csr
from issuance.pki.x509 import split_pem_chain
from issuance.shapes import ApprovalPolicy, CaIssuerSpec, IssuerSpec, SelfSignedIssuerSpec
from issuance.specs.certificate import check_name
from issuance.specs.errors import Errors
from issuance.specs.fields import (
    check_object,
    https_url,
    opt_bool,
    opt_duration,
    opt_resource_name,
    opt_str,
)
from issuance.specs.outcome import Applied, Outcome, changed_fields
from issuance.specs.secret_refs import TLS, SecretWrite, owner_conflict, secret_exists, store
from issuance.worker.wakeup import wake

# The fields of a `ca` block (the API schema's CaIssuer shape lists the same).
CA_FIELDS = (
    "secretName",
    "maxDuration",
    "generate",
    "commonName",
    "certificate",
    "privateKey",
    "crlDistributionPoint",
)

KINDS = ("acme", "ca", "selfSigned")
UNSUPPORTED_KINDS = {
    "vault": "only acme, ca and selfSigned issuers are supported",
    "venafi": "only acme, ca and selfSigned issuers are supported",
}
CA_UNSUPPORTED = {
    "crlDistributionPoints": (
        "use crlDistributionPoint: one http(s) URL, e.g. https://<console>/crl/<issuer>.crl, "
        "where this console serves the issuer's CRL"
    ),
    "ocspServers": "OCSP is not served",
    "issuingCertificateURLs": "AIA issuing certificate URLs are not added",
}
GENERATED_CA_LIFETIME = timedelta(days=3650)


def _auto_approve(value: Any, where: str, errors: Errors) -> Any:
    if value not in ("owned", "all", "none"):
        errors.add(where, "must be one of owned, all, none")
        return None
    return value


# approvalPolicy fields and their validators (value, field path, errors) -> normalized value.
# Extend this mapping to add policy fields.
APPROVAL_POLICY_FIELDS: dict[str, Callable[[Any, str, Errors], Any]] = {
    "autoApprove": _auto_approve,
    "rules": approval_spec.validate_rules,
    "deny": approval_spec.validate_deny,
}


@dataclass
class IssuerPlan:
    """A validated issuer spec plus what must be stored next to it."""

    kind: str
    spec: IssuerSpec
    secrets: list[SecretWrite] = field(default_factory=list)
    # (secretName, commonName) of a CA to generate if that Secret does not exist yet.
    generate_ca: tuple[str, str] | None = None


def _approval_policy(value: Any, path: str, errors: Errors) -> ApprovalPolicy | None:
    obj = check_object(value, path, errors, tuple(APPROVAL_POLICY_FIELDS))
    if obj is None:
        return None
    out: dict[str, Any] = {}
    for key, validate in APPROVAL_POLICY_FIELDS.items():
        if key in obj:
            normalized = validate(obj[key], f"{path}.{key}", errors)
            if normalized is not None:
                out[key] = normalized
    # Each field as its validator in APPROVAL_POLICY_FIELDS returned it.
    return cast(ApprovalPolicy, out)


def _inline_ca(
    obj: dict[str, Any], path: str, errors: Errors, secret_name: str
) -> SecretWrite | None:
    cert_pem = opt_str(obj, "certificate", path, errors, max_len=64 * 1024)
    key_pem = opt_str(obj, "privateKey", path, errors, max_len=64 * 1024)
    if cert_pem is None or key_pem is None:
        if cert_pem is None and obj.get("certificate") is None:
            errors.add(f"{path}.certificate", "is required with privateKey")
        if key_pem is None and obj.get("privateKey") is None:
            errors.add(f"{path}.privateKey", "is required with certificate")
        return None
    blocks = split_pem_chain(cert_pem)
    try:
        cert = x509.load_pem_x509_certificate(blocks[0].encode()) if blocks else None
    except ValueError:
        cert = None
    if cert is None:
        errors.add(f"{path}.certificate", "must be a PEM CERTIFICATE")
        return None
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        errors.add(f"{path}.certificate", "is not a CA certificate (basicConstraints CA:TRUE)")
    try:
        # A key from outside: checked in full here, once; stored, it is loaded the fast way.
        key = validate_private_key(key_pem, f"{path}.privateKey")
    except InvalidPrivateKey as exc:
        errors.add(exc.field, exc.reason)
        return None
    if public_key_bytes(key.public_key()) != public_key_bytes(cert.public_key()):
        errors.add(f"{path}.privateKey", "does not match the certificate's public key")
        return None
    chain = "".join(blocks)
    return SecretWrite(
        secret_name,
        f"{path}.privateKey",
        type=TLS,
        tls_crt=chain,
        ca_crt=blocks[-1],
        tls_key=private_key_to_pem(key, "PKCS8"),
    )


def _ca(
    value: Any, path: str, errors: Errors, issuer: str, plan: IssuerPlan, lookups: bool
) -> CaIssuerSpec | None:
    obj = check_object(value, path, errors, CA_FIELDS, hints=CA_UNSUPPORTED)
    if obj is None:
        return None
    out: CaIssuerSpec = {}
    secret_name = opt_resource_name(obj, "secretName", path, errors)
    generate = opt_bool(obj, "generate", path, errors)
    inline = "certificate" in obj or "privateKey" in obj
    common_name = opt_str(obj, "commonName", path, errors, max_len=64)
    if generate and inline:
        errors.add(f"{path}.generate", "use generate or certificate+privateKey, not both")
    elif generate:
        out["generate"] = True
        out["secretName"] = secret_name or f"{issuer}-ca"
        out["commonName"] = common_name or f"{issuer} CA"
        plan.generate_ca = (out["secretName"], out["commonName"])
    elif inline:
        out["secretName"] = secret_name or f"{issuer}-ca"
        write = _inline_ca(obj, path, errors, out["secretName"])
        if write:
            plan.secrets.append(write)
    elif secret_name:
        # A Secret that does not exist yet is not refused, as in cert-manager: the Issuer is
        # Ready=False (ErrGetKeyPair) until it appears, e.g. written by a Certificate applied
        # with it (the CA bootstrap: selfSigned Issuer, isCA Certificate, CA Issuer).
        out["secretName"] = secret_name
    elif obj.get("secretName") is None:
        errors.add(f"{path}.secretName", "is required (or generate: true, or inline certificate)")
    if common_name and not generate:
        errors.add(f"{path}.commonName", "only used with generate: true")
    if lookups and out.get("secretName") and (generate or inline):
        problem = owner_conflict(out["secretName"])
        if problem:
            errors.add(f"{path}.secretName", problem)
    max_duration = opt_duration(obj, "maxDuration", path, errors)
    if max_duration:
        out["maxDuration"] = max_duration[0]
    crl_url = opt_str(obj, "crlDistributionPoint", path, errors, max_len=1024)
    if crl_url and https_url(crl_url, f"{path}.crlDistributionPoint", errors, allow_http=True):
        # Written into every certificate this issuer signs (issuers/ca.py); plain http is
        # allowed, as CRLs are signed and usually fetched over http (RFC 5280 §4.2.1.13).
        out["crlDistributionPoint"] = crl_url
    return out


def _self_signed(value: Any, path: str, errors: Errors) -> SelfSignedIssuerSpec | None:
    obj = check_object(
        value if value is not None else {},
        path,
        errors,
        ("maxDuration",),
        hints={"crlDistributionPoints": "CRLs are not published"},
    )
    if obj is None:
        return None
    max_duration = opt_duration(obj, "maxDuration", path, errors)
    return {"maxDuration": max_duration[0]} if max_duration else {}


def validate_issuer_spec(name: str, spec: Any, *, lookups: bool = True) -> IssuerPlan:
    """Validate and normalize; raises SpecError listing every problem.

    `lookups=False` skips the database checks (existing Secrets), for pure validation.
    """
    errors = Errors()
    path = "spec"
    obj = check_object(spec, path, errors, (*KINDS, "approvalPolicy"), hints=UNSUPPORTED_KINDS)
    plan = IssuerPlan(kind="", spec={})
    if obj is None:
        errors.raise_if_any()
        return plan
    kinds = [k for k in KINDS if k in obj]
    if len(kinds) != 1 and not any(k in obj for k in UNSUPPORTED_KINDS):
        errors.add(path, "set exactly one of acme, ca or selfSigned")
    if len(kinds) == 1:
        plan.kind = kinds[0]
        where = f"{path}.{plan.kind}"
        if plan.kind == IssuerKind.ACME:
            acme = validate_acme(obj["acme"], where, errors, name, plan.secrets)
            if acme is not None:
                plan.spec["acme"] = acme
        elif plan.kind == IssuerKind.CA:
            ca = _ca(obj["ca"], where, errors, name, plan, lookups)
            if ca is not None:
                plan.spec["ca"] = ca
        else:
            self_signed = _self_signed(obj["selfSigned"], where, errors)
            if self_signed is not None:
                plan.spec["selfSigned"] = self_signed
    if "approvalPolicy" in obj:
        policy = _approval_policy(obj["approvalPolicy"], f"{path}.approvalPolicy", errors)
        if policy:
            plan.spec["approvalPolicy"] = policy
    if lookups:
        for write in plan.secrets:
            problem = owner_conflict(write.name)
            if problem:
                errors.add(write.path, problem)
    errors.raise_if_any()
    return plan


def _generate_ca(secret_name: str, common_name: str) -> bool:
    """Make a CA key pair unless the Secret exists; returns whether one was made."""
    if secret_exists(secret_name):
        return False
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"commonName": common_name})
    cert = sign_csr(csr, key, None, duration=GENERATED_CA_LIFETIME, now=timezone.now(), is_ca=True)
    return store(
        SecretWrite(
            secret_name,
            "spec.ca.generate",
            tls_crt=cert,
            ca_crt=cert,
            tls_key=private_key_to_pem(key, "PKCS8"),
        )
    )


@transaction.atomic
def apply_issuer_ex(
    name: str, spec: Any, *, cluster: bool = False, actor: str, plan: IssuerPlan | None = None
) -> Applied[Issuer]:
    """Create or update an Issuer (or ClusterIssuer) from a spec; nothing is half-stored.

    `plan`: what validate_issuer_spec returned for this very spec, when the caller validated
    it first (`apply -f` checks every document before applying any), so that a private key
    from outside is checked once, not twice.
    """
    check_name(name)
    if plan is None:
        plan = validate_issuer_spec(name, spec)
    secrets_changed = False
    for write in plan.secrets:
        secrets_changed = store(write) or secrets_changed
    if plan.generate_ca:
        secrets_changed = _generate_ca(*plan.generate_ca) or secrets_changed
    kind_word = "ClusterIssuer" if cluster else "Issuer"
    issuer = Issuer.objects.select_for_update().filter(name=name).first()
    if issuer is None:
        issuer = Issuer.objects.create(
            name=name, kind=plan.kind, spec=plan.spec, cluster_scoped=cluster
        )
        events.record("Issuer", name, "Created", f"{kind_word} created ({plan.kind})", actor=actor)
        wake(issuer)
        return Applied(issuer, Outcome.CREATED)
    if issuer.spec == plan.spec and issuer.cluster_scoped == cluster and not secrets_changed:
        return Applied(issuer, Outcome.UNCHANGED)
    fields = changed_fields(issuer.spec, plan.spec) or ["secrets"]
    issuer.spec = plan.spec
    issuer.kind = plan.kind
    issuer.cluster_scoped = cluster
    issuer.generation += 1
    issuer.save(update_fields=["spec", "kind", "cluster_scoped", "generation", "updated_at"])
    events.record(
        "Issuer",
        name,
        "SpecChanged",
        f"Spec changed ({', '.join(fields)}); generation {issuer.generation}",
        actor=actor,
    )
    wake(issuer)
    return Applied(issuer, Outcome.CONFIGURED)


def apply_issuer(name: str, spec: Any, *, cluster: bool = False, actor: str) -> tuple[Issuer, bool]:
    applied = apply_issuer_ex(name, spec, cluster=cluster, actor=actor)
    return applied.obj, applied.created
