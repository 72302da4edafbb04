"""CertificateRequest specs (created from a PEM CSR through the API); immutable once stored."""

from __future__ import annotations

import base64
import binascii
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction

from issuance.models import CertificateRequest
from issuance.observability import events
from issuance.pki.csr import MAX_CSR_PEM_BYTES, CSRError, parse_csr
from issuance.shapes import CertificateRequestSpec
from issuance.specs.certificate import (
    IssuerExists,
    check_name,
    issuer_in_db,
    resolve_issuer,
    validate_issuer_ref,
    validate_usages,
)
from issuance.specs.errors import Errors, SpecError
from issuance.specs.fields import check_object, opt_bool, opt_duration, opt_int
from issuance.timing.durations import MAX_SECONDS, format_duration
from issuance.worker.wakeup import wake

FIELDS = ("request", "issuerRef", "duration", "usages", "isCA", "expirationSeconds")
SERVER_SET = "set by the server from the authenticated user; leave it out"
UNSUPPORTED = {"username": SERVER_SET, "uid": SERVER_SET, "groups": SERVER_SET, "extra": SERVER_SET}
MIN_EXPIRATION_SECONDS = 600


def _csr_pem(value: Any, where: str, errors: Errors) -> str | None:
    """PEM text; the base64-of-PEM form cert-manager manifests carry is accepted too."""
    if not isinstance(value, str) or not value.strip():
        errors.add(where, "is required: a PEM-encoded CERTIFICATE REQUEST")
        return None
    if len(value) > MAX_CSR_PEM_BYTES * 2:
        errors.add(where, f"CSR is larger than {MAX_CSR_PEM_BYTES} bytes")
        return None
    pem = value
    if "-----BEGIN" not in value:
        try:
            pem = base64.b64decode("".join(value.split()), validate=True).decode()
        except (binascii.Error, ValueError):
            errors.add(where, "must be a PEM block of type CERTIFICATE REQUEST (or base64 of one)")
            return None
    try:
        parse_csr(pem)
    except CSRError as exc:
        errors.add(where, str(exc))
        return None
    return pem


def validate_request_spec(
    spec: Any, *, issuer_exists: IssuerExists | None = issuer_in_db
) -> CertificateRequestSpec:
    errors = Errors()
    path = "spec"
    obj = check_object(spec, path, errors, FIELDS, hints=UNSUPPORTED)
    if obj is None:
        raise SpecError(errors.items)  # check_object said why
    out: CertificateRequestSpec = {}
    pem = _csr_pem(obj.get("request"), f"{path}.request", errors)
    if pem:
        out["request"] = pem
    if obj.get("issuerRef") is None:
        errors.add(f"{path}.issuerRef", "is required")
    else:
        ref = validate_issuer_ref(obj["issuerRef"], f"{path}.issuerRef", errors, issuer_exists)
        if ref:
            out["issuerRef"] = ref
    duration = opt_duration(obj, "duration", path, errors)
    seconds = opt_int(
        obj, "expirationSeconds", path, errors, minimum=MIN_EXPIRATION_SECONDS, maximum=MAX_SECONDS
    )
    if duration and seconds is not None:
        errors.add(f"{path}.expirationSeconds", "set duration or expirationSeconds, not both")
    elif duration:
        out["duration"] = duration[0]
    elif seconds is not None:
        # Kubernetes CSR style; stored as the duration cert-manager's signers read.
        out["duration"] = format_duration(timedelta(seconds=seconds))
    usages = validate_usages(obj, path, errors)
    if usages:
        out["usages"] = usages
    is_ca = opt_bool(obj, "isCA", path, errors)
    if is_ca is not None:
        out["isCA"] = is_ca
    errors.raise_if_any()
    return out


def generated_name() -> str:
    return f"csr-{secrets.token_hex(5)}"


@transaction.atomic
def create_certificate_request(
    name: str | None, spec: Any, *, requester: str, source: str = "api"
) -> CertificateRequest:
    """A new external CertificateRequest (no owning Certificate), waiting for approval."""
    name = check_name(name) if name is not None else generated_name()
    normalized = validate_request_spec(spec)
    if CertificateRequest.objects.filter(name=name).exists():
        raise SpecError([("name", f"a CertificateRequest named {name!r} already exists")])
    issuer = resolve_issuer(normalized["issuerRef"]["name"])
    request = CertificateRequest.objects.create(
        name=name, spec=normalized, issuer=issuer, requester=requester, source=source
    )
    events.record(
        "CertificateRequest",
        name,
        "Created",
        f"CertificateRequest created by {requester or 'anonymous'} ({source})",
        actor=requester,
    )
    wake(request)
    return request
