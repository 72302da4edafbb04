"""External CertificateRequests submitted by bootstrap clients (and mirrored CSRs).

The client's part of the spec is validated like any API request
(issuance.specs.certificaterequest); what the server knows about the requester
(username, groups, signerName) is added after validation, so a client cannot claim it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from issuance.kubernetes.csr_connector.config import issuer_for_signer
from issuance.models import BootstrapToken, CertificateRequest, Issuer
from issuance.observability import events
from issuance.shapes import CertificateRequestSpec
from issuance.specs.certificate import check_name
from issuance.specs.certificaterequest import generated_name, validate_request_spec
from issuance.specs.errors import SpecError
from issuance.worker.wakeup import wake

CLIENT_FIELDS = ("name", "request", "issuerRef", "signerName", "expirationSeconds", "usages")
# A client stuck in a loop must not flood the approval queue.
MAX_PENDING_PER_TOKEN = 20


class TooManyPending(Exception):
    pass


def _resolve_issuer(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """issuerRef {name} or signerName (mapped by KUBE_SIGNER_NAMES) → issuerRef."""
    signer = body.get("signerName")
    if signer is None:
        if "issuerRef" not in body:
            raise SpecError([("issuerRef", "is required (or give signerName)")])
        return body["issuerRef"], ""
    if not isinstance(signer, str) or not signer:
        raise SpecError([("signerName", "must be a non-empty string")])
    if "issuerRef" in body:
        raise SpecError([("signerName", "give issuerRef or signerName, not both")])
    issuer = issuer_for_signer(signer)
    if issuer is None:
        raise SpecError([("signerName", f"unknown signerName {signer!r} (see KUBE_SIGNER_NAMES)")])
    return {"name": issuer}, signer


def submit(token: BootstrapToken, body: Any) -> CertificateRequest:
    if not isinstance(body, dict):
        raise SpecError([("", "must be a JSON object")])
    unknown = sorted(set(body) - set(CLIENT_FIELDS))
    if unknown:
        raise SpecError([(key, "unsupported field") for key in unknown])
    issuer_ref, signer = _resolve_issuer(body)
    user_spec = {k: body[k] for k in ("request", "expirationSeconds", "usages") if k in body}
    user_spec["issuerRef"] = issuer_ref
    spec = validate_request_spec(user_spec)
    issuer_name = spec["issuerRef"]["name"]
    if token.issuer_names and issuer_name not in token.issuer_names:
        raise SpecError(
            [("issuerRef.name", f"this bootstrap token may not submit to issuer {issuer_name!r}")]
        )
    name = check_name(body["name"]) if body.get("name") is not None else generated_name()
    spec["username"] = token.username
    spec["groups"] = token.all_groups
    if signer:
        spec["signerName"] = signer
    if body.get("expirationSeconds") is not None:
        spec["expirationSeconds"] = body["expirationSeconds"]
    return create_external(name, spec, requester=token.username, source="bootstrap")


@transaction.atomic
def create_external(
    name: str, spec: CertificateRequestSpec, *, requester: str, source: str
) -> CertificateRequest:
    if source == "bootstrap":
        pending = CertificateRequest.objects.filter(
            source=source, requester=requester, approval="Pending"
        ).count()
        if pending >= MAX_PENDING_PER_TOKEN:
            raise TooManyPending(
                f"{pending} requests of {requester} are waiting for approval already"
            )
    if CertificateRequest.objects.filter(name=name).exists():
        raise SpecError([("name", f"a CertificateRequest named {name!r} already exists")])
    issuer = Issuer.objects.get(name=spec["issuerRef"]["name"])
    request = CertificateRequest.objects.create(
        name=name, spec=spec, issuer=issuer, requester=requester, source=source
    )
    events.record(
        "CertificateRequest",
        name,
        "Created",
        f"CertificateRequest submitted by {requester} ({source})",
        actor=requester,
    )
    wake(request)
    return request
