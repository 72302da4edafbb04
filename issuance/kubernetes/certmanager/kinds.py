"""The cert-manager resources the console mirrors, and the access it needs to a cluster.

Field and resource names follow cert-manager's public API reference (cert-manager.io/v1 and
acme.cert-manager.io/v1).
"""

from __future__ import annotations

from dataclasses import dataclass

CERT_MANAGER_GROUP = "cert-manager.io"
ACME_GROUP = "acme.cert-manager.io"
GROUPS = (CERT_MANAGER_GROUP, ACME_GROUP)
VERSION = "v1"


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{VERSION}"

    @property
    def resource(self) -> str:
        """`plural.group`, as RBAC and kubectl name it."""
        return f"{self.plural}.{self.group}"


CERTIFICATE = Kind("Certificate", CERT_MANAGER_GROUP, "certificates")
CERTIFICATE_REQUEST = Kind("CertificateRequest", CERT_MANAGER_GROUP, "certificaterequests")
ISSUER = Kind("Issuer", CERT_MANAGER_GROUP, "issuers")
CLUSTER_ISSUER = Kind("ClusterIssuer", CERT_MANAGER_GROUP, "clusterissuers", namespaced=False)
ORDER = Kind("Order", ACME_GROUP, "orders")
CHALLENGE = Kind("Challenge", ACME_GROUP, "challenges")

MIRRORED: tuple[Kind, ...] = (
    CERTIFICATE,
    CERTIFICATE_REQUEST,
    ISSUER,
    CLUSTER_ISSUER,
    ORDER,
    CHALLENGE,
)
BY_KIND = {k.kind: k for k in MIRRORED}


@dataclass(frozen=True)
class Access:
    """One SelfSubjectAccessReview: `verb` on `group`/`resource`[/`subresource`]."""

    verb: str
    group: str
    resource: str
    subresource: str = ""

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        return f"{self.verb} {what}" + (f".{self.group}" if self.group else "")


def required_access() -> list[Access]:
    """Everything the console needs, in the order the Clusters page lists what is missing."""
    out: list[Access] = []
    for kind in MIRRORED:
        out.extend(Access(verb, kind.group, kind.plural) for verb in ("get", "list", "watch"))
    out.extend(Access(verb, "", "events") for verb in ("get", "list", "watch", "create"))
    for plural in ("certificates", "certificaterequests"):
        out.extend(
            Access(verb, CERT_MANAGER_GROUP, plural, "status") for verb in ("update", "patch")
        )
    out.append(Access("approve", CERT_MANAGER_GROUP, "signers"))
    return out
