"""What the approval policy looks at: the requester and the CSR's contents, read once."""

from __future__ import annotations

from dataclasses import dataclass, field

from issuance.models import CertificateRequest
from issuance.pki.csr import parse_csr
from issuance.shapes import CertificateRequestSpec
from issuance.timing.durations import DurationError, parse_duration


@dataclass(frozen=True)
class RequestFacts:
    requester: str
    groups: list[str]
    signer_name: str
    common_name: str
    dns_names: list[str]
    ip_addresses: list[str]
    usages: list[str]
    # None: the request did not ask for a lifetime (the issuer's default applies).
    expiration_seconds: int | None
    owned: bool = False
    organizations: list[str] = field(default_factory=list)


def requested_seconds(spec: CertificateRequestSpec) -> int | None:
    if spec.get("expirationSeconds") is not None:
        try:
            return int(str(spec["expirationSeconds"]))
        except ValueError:
            return None
    if spec.get("duration"):
        try:
            return int(parse_duration(str(spec["duration"])).total_seconds())
        except DurationError:
            return None
    return None


def facts_of(request: CertificateRequest) -> RequestFacts:
    """Raises CSRError when the stored CSR does not parse (the caller denies such requests)."""
    spec = request.typed_spec or {}
    info = parse_csr(request.csr_pem)
    groups = spec.get("groups") or []
    return RequestFacts(
        requester=request.requester or str(spec.get("username") or ""),
        groups=[str(g) for g in groups] if isinstance(groups, list) else [],
        signer_name=str(spec.get("signerName") or ""),
        common_name=info.common_name,
        dns_names=list(info.dns_names),
        ip_addresses=list(info.ip_addresses),
        usages=[str(u) for u in spec.get("usages") or []],
        expiration_seconds=requested_seconds(spec),
        owned=request.certificate_id is not None,
        organizations=list(info.organizations),
    )
