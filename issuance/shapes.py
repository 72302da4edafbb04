"""The JSON shapes of specs and statuses, as TypedDicts: cert-manager's camelCase field names.

What a spec validator returns, what a controller writes into `spec` or a status column, and
what the code reading them expects is named here instead of `dict[str, Any]`. JSON whose
keys are not fixed (user input before validation, what a CA answers, a webhook's `config`)
stays `dict[str, Any]` / `Mapping[str, object]`.

Model JSONField columns are `Any` to mypy: each model reads them through one typed accessor
(`typed_spec`, `get_condition`, ...), so the casts are in one place per model.

Required or not: the validators build a spec key by key and leave out what was not given
(or was null), so most spec fields are optional (`total=False`) and readers use `.get()`
with the default the code applies. A field is `Required` where every writer sets it.

This module imports nothing from the project, so the models, the ACME protocol package and
the framework bypasses can use it without loading anything above them (docs/architecture.md,
"Layers"); it is not in issuance/specs/, whose package loads the models and the validators.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NotRequired, Required, TypedDict

# -- shared ---------------------------------------------------------------------------------


class IssuerRef(TypedDict, total=False):
    """cert-manager's ObjectReference to an Issuer. The validators always fill in `kind`
    (default "Issuer"); a Challenge made for an Order without one names the issuer only."""

    name: Required[str]
    kind: str
    group: str


class SecretKeySelector(TypedDict, total=False):
    """A value in a stored Secret (`issuance.specs.secret_refs.read_secret_value`)."""

    name: Required[str]
    key: str


class ConditionExtra(TypedDict, total=False):
    """The fields some conditions have besides the usual ones."""

    decidedBy: str  # Approved/Denied of a CertificateRequest: who decided


class Condition(ConditionExtra):
    """One entry of a resource's `conditions` (`Resource.set_condition` writes them)."""

    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str
    lastTransitionTime: str  # ISO 8601


# -- Certificate ----------------------------------------------------------------------------


class X509Subject(TypedDict, total=False):
    organizations: list[str]
    organizationalUnits: list[str]
    countries: list[str]
    localities: list[str]
    provinces: list[str]
    streetAddresses: list[str]
    postalCodes: list[str]
    serialNumber: str


class OtherName(TypedDict):
    """One of `spec.otherNames`: an otherName SAN, its value a UTF8String."""

    oid: str  # dotted, e.g. 1.3.6.1.4.1.311.20.2.3 (UPN)
    utf8Value: str


class NameConstraintItem(TypedDict, total=False):
    """`permitted` or `excluded` of `spec.nameConstraints` (validated, normalized)."""

    dnsDomains: list[str]  # lower-cased; a leading '.' means subdomains only
    ipRanges: list[str]  # CIDR, network address
    emailAddresses: list[str]  # a mailbox, a host or a .domain
    uriDomains: list[str]  # a host or a .domain


class NameConstraintsSpec(TypedDict, total=False):
    """`spec.nameConstraints` (only with isCA): written into a CA certificate."""

    critical: bool
    permitted: NameConstraintItem
    excluded: NameConstraintItem


class CertificateNames(TypedDict, total=False):
    """What a CSR is built from (`issuance.pki.csr.build_csr`): the subject, the SANs and
    the name constraints a CA certificate is to carry."""

    commonName: str
    dnsNames: list[str]
    ipAddresses: list[str]
    uris: list[str]
    emailAddresses: list[str]
    otherNames: list[OtherName]
    subject: X509Subject
    nameConstraints: NameConstraintsSpec


class PrivateKeySpec(TypedDict, total=False):
    """`spec.privateKey`; absent fields take cert-manager's defaults (RSA 2048, PKCS1,
    rotationPolicy Always)."""

    algorithm: str  # RSA, ECDSA, Ed25519
    size: int
    rotationPolicy: str  # Always, Never
    encoding: str  # PKCS1, PKCS8


class SecretExportRef(TypedDict, total=False):
    """Extension: also write the key pair to this Kubernetes Secret."""

    namespace: str
    name: str


class SecretTemplateSpec(TypedDict, total=False):
    """`spec.secretTemplate`: carried onto the Secret the console exports (secretExport)."""

    labels: dict[str, str]
    annotations: dict[str, str]


class RenewalWindow(TypedDict):
    """One of `spec.renewal.windows`: renewals may start within `windowDuration` after each
    time the cron expression matches, in `timezone` (issuance/timing/renewal.py)."""

    cron: str
    timezone: str
    windowDuration: str


class RenewalSpec(TypedDict, total=False):
    """`spec.renewal`, as cert-manager 1.21: `policy: Disabled` or windows."""

    policy: str
    windows: list[RenewalWindow]


class OutputFormat(TypedDict):
    """cert-manager's CertificateAdditionalOutputFormat."""

    type: str  # CombinedPEM | DER


class Pkcs12Keystore(TypedDict, total=False):
    create: Required[bool]
    passwordSecretRef: SecretKeySelector
    profile: str  # LegacyRC2 | LegacyDES | Modern2023


class JksKeystore(TypedDict, total=False):
    create: Required[bool]
    passwordSecretRef: SecretKeySelector
    alias: str


class KeystoresSpec(TypedDict, total=False):
    pkcs12: Pkcs12Keystore
    jks: JksKeystore


class CertificateSpec(CertificateNames, total=False):
    """A Certificate's spec as `validate_certificate_spec` stores it. `duration` (default
    2160h) and `issuerRef` are always set by it too."""

    secretName: Required[str]
    duration: str  # Go duration, canonical form
    renewBefore: str
    renewBeforePercentage: int
    issuerRef: IssuerRef
    privateKey: PrivateKeySpec
    usages: list[str]
    isCA: bool
    revisionHistoryLimit: int
    encodeUsagesInRequest: bool
    secretExport: SecretExportRef
    secretTemplate: SecretTemplateSpec
    renewal: RenewalSpec
    additionalOutputFormats: list[OutputFormat]
    keystores: KeystoresSpec


# -- Issuer ---------------------------------------------------------------------------------


class SolverSelectorSpec(TypedDict, total=False):
    dnsNames: list[str]  # lower-cased; `*.example.com` for wildcards
    dnsZones: list[str]
    matchLabels: dict[str, str]  # all must be on the Certificate (metadata.labels)


# Functional form: `class` is a Python keyword. cert-manager's `http01.ingress` settings are
# stored as written, never used here (the Issuer is Ready=False SolverNotUsable;
# acme/solvers/usability.py).
Http01IngressSpec = TypedDict(
    "Http01IngressSpec",
    {
        "class": str,
        "ingressClassName": str,
        "name": str,
        "serviceType": str,  # ClusterIP or NodePort
        "podTemplate": dict[str, Any],  # as the user gave it
        "ingressTemplate": dict[str, Any],  # as the user gave it
    },
    total=False,
)


class Http01GatewayHTTPRouteSpec(TypedDict, total=False):
    """cert-manager's `http01.gatewayHTTPRoute` settings: stored as written, never used here."""

    serviceType: str  # ClusterIP or NodePort
    labels: dict[str, Any]  # as the user gave it
    parentRefs: list[dict[str, Any]]  # as the user gave them
    podTemplate: dict[str, Any]  # as the user gave it


class Http01Spec(TypedDict, total=False):
    """`http01: {}`: the console answers HTTP-01 itself; nothing to configure. cert-manager's
    ingress/gatewayHTTPRoute settings are kept only when non-empty, and make the solver not
    usable here."""

    ingress: Http01IngressSpec
    gatewayHTTPRoute: Http01GatewayHTTPRouteSpec


class Rfc2136Spec(TypedDict, total=False):
    nameserver: str  # host, host:port or [IPv6]:port
    tsigKeyName: str
    tsigAlgorithm: str
    protocol: str
    tsigSecretSecretRef: SecretKeySelector
    # Inline secret: the validator moves it into a Secret (tsigSecretSecretRef), but the
    # solver still reads one from a spec that has it.
    tsigSecret: str


class WebhookSpec(TypedDict, total=False):
    url: str
    groupName: str
    solverName: str
    config: dict[str, Any]  # passed through as the user gave it


class Dns01Spec(TypedDict, total=False):
    """Exactly one provider block: rfc2136, webhook, lexicon, or one of cert-manager's
    blocks mapped onto a lexicon provider (their options: issuance/specs/dns_providers.py)."""

    cnameStrategy: str
    rfc2136: Rfc2136Spec
    webhook: WebhookSpec
    lexicon: dict[str, Any]
    cloudflare: dict[str, Any]
    route53: dict[str, Any]
    digitalocean: dict[str, Any]
    azureDNS: dict[str, Any]
    cloudDNS: dict[str, Any]


class SolverSpec(TypedDict, total=False):
    """One of `spec.acme.solvers` (also copied onto each Challenge): exactly one of
    http01 and dns01, and an optional selector."""

    selector: SolverSelectorSpec
    http01: Http01Spec
    dns01: Dns01Spec
    waitInsteadOfSelfCheck: str  # Go duration: answer this long after presenting, unchecked


class ExternalAccountBinding(TypedDict, total=False):
    keyID: str
    keyAlgorithm: str  # HS256 (default), HS384, HS512
    keySecretRef: SecretKeySelector
    # Inline key: the validator moves it into a Secret (keySecretRef), but the account
    # code still reads one from a spec that has it.
    hmacKey: str


class AcmeFallbackServer(TypedDict, total=False):
    """One of `spec.acme.fallback`: a further ACME server, asked in order when the ones
    before it are unreachable, paused or refuse the order (acme/fallback.py)."""

    server: str  # required by validation
    email: str
    externalAccountBinding: ExternalAccountBinding
    profile: str
    caBundle: str
    skipTLSVerify: bool


class AcmeIssuerSpec(TypedDict, total=False):
    """`spec.acme`. `server` is required by validation (left out only when given as null)."""

    server: str
    email: str
    privateKeySecretRef: SecretKeySelector
    # Never generate the account key: read it from privateKeySecretRef (acme/accounts.py).
    disableAccountKeyGeneration: bool
    caBundle: str  # base64 of PEM
    skipTLSVerify: bool
    enableDurationFeature: bool
    profile: str
    preferredChain: str
    externalAccountBinding: ExternalAccountBinding
    solvers: list[SolverSpec]
    fallback: list[AcmeFallbackServer]


class CaIssuerSpec(TypedDict, total=False):
    """`spec.ca`; `generate` and `commonName` are extensions (make the CA key pair)."""

    secretName: str
    generate: bool
    commonName: str
    maxDuration: str
    crlDistributionPoint: str


class SelfSignedIssuerSpec(TypedDict, total=False):
    maxDuration: str


class ApprovalRules(TypedDict, total=False):
    """`approvalPolicy.rules`: every configured check must pass (issuance.approval.checks)."""

    allowedSignerNames: list[str]
    requesterPattern: str
    dnsSanRegex: str
    commonNameMustMatchRequester: bool
    requireDnsResolvesToIps: bool
    maxDnsSans: int
    ipSanCidrs: list[str]
    maxExpirationSeconds: int


class DenyRule(TypedDict, total=False):
    """One of `approvalPolicy.deny`: a request matching all its conditions is denied."""

    name: Required[str]
    message: str
    signerNames: list[str]
    groups: list[str]
    requesterPattern: str
    commonNamePattern: str
    dnsSanRegex: str
    ipSanCidrs: list[str]
    expirationSecondsAbove: int


class ApprovalPolicy(TypedDict, total=False):
    autoApprove: str  # owned (default), all, none
    rules: ApprovalRules
    deny: list[DenyRule]


# The block of an Issuer's kind (`Issuer.kind_spec`).
IssuerKindSpec = AcmeIssuerSpec | CaIssuerSpec | SelfSignedIssuerSpec


class IssuerSpec(TypedDict, total=False):
    """An Issuer's spec: exactly one of acme, ca and selfSigned (`Issuer.kind` says which)."""

    acme: AcmeIssuerSpec
    ca: CaIssuerSpec
    selfSigned: SelfSignedIssuerSpec
    approvalPolicy: ApprovalPolicy


# -- CertificateRequest ---------------------------------------------------------------------


class RequestRequester(TypedDict):
    """Who made a Certificate's own request (the certificates controller)."""

    username: str
    source: str


class KubeCsrRef(TypedDict):
    """The Kubernetes CertificateSigningRequest a request mirrors."""

    name: str
    uid: str


class CertificateRequestSpec(TypedDict, total=False):
    """A CertificateRequest's spec (immutable). The client's part is validated
    (`validate_request_spec`); the rest is set by the server from who asked."""

    request: str  # PEM CSR
    issuerRef: IssuerRef
    duration: str
    usages: list[str]
    isCA: bool
    expirationSeconds: int
    # Set by the server: bootstrap clients and mirrored Kubernetes CSRs.
    username: str
    groups: list[str]
    signerName: str
    uid: str
    extra: dict[str, Any]  # the Kubernetes CSR's spec.extra, as given
    kubernetes: KubeCsrRef
    # A Certificate's own request.
    requester: RequestRequester


# -- Order ----------------------------------------------------------------------------------


class OrderSpec(TypedDict):
    """An Order's spec (immutable), made from its request's CSR (`acme/issuer.py`)."""

    request: str  # the CertificateRequest's name
    issuerRef: IssuerRef
    dnsNames: list[str]
    commonName: str
    ipAddresses: list[str]
    duration: NotRequired[str]
    profile: NotRequired[str]
    replaces: NotRequired[str]  # ARI: the certificate this order renews (RFC 9773 §5)


class AuthorizationChallenge(TypedDict):
    """A challenge the CA offers in an authorization, as the CA sent it (None if not)."""

    type: str | None
    url: str | None
    token: str | None
    status: str | None


class OrderAuthorization(TypedDict, total=False):
    """One of `Order.authorizations`: the URL from the ACME order, the rest once read."""

    url: Required[str]
    identifier: str
    identifierType: str
    wildcard: bool
    status: str
    expires: str
    challenges: list[AuthorizationChallenge]
    error: str  # the CA's problem, as a reason; "" when none


class Restart(TypedDict):
    """One of `Order.restarts`: an ACME order given up because the CA had an outage
    meanwhile (controllers/order_retry.py)."""

    url: str
    state: str
    reason: str
    failedAt: str  # ISO 8601
    outage: str


# -- Challenge ------------------------------------------------------------------------------


class ChallengeSpec(TypedDict):
    """A Challenge's spec (immutable), made by the orders controller."""

    authorizationURL: str
    url: str
    dnsName: str  # without `*.`
    wildcard: bool
    type: str  # http-01, dns-01
    token: str
    key: str  # HTTP-01: the key authorization; DNS-01: the TXT value
    solver: SolverSpec
    issuerRef: IssuerRef


# -- statuses the API works out when asked ---------------------------------------------------


class AcmeServerStatus(TypedDict):
    """An ACME Issuer's `status.ca`: does its server answer (issuance/api/issuers.py)."""

    server: str
    reachable: bool
    unreachableSince: datetime | None
    lastError: str
    failedRequests: int
    nextProbeAt: datetime | None


class CaUnreachable(TypedDict):
    """A Certificate's `status.caUnreachable`: its issuer's ACME server does not answer."""

    server: str
    since: str  # ISO 8601, as the API writes times
    error: str
    reason: str


# -- approval -------------------------------------------------------------------------------


class PolicyCheck(TypedDict):
    name: str
    passed: bool
    detail: str


class PolicyEvaluation(TypedDict):
    """`CertificateRequest.policy_checks`: the approval policy's last verdict."""

    outcome: str  # approve, deny, pending
    reason: str
    rule: str  # the deny rule that decided a denial
    checks: list[PolicyCheck]
    evaluatedAt: str  # ISO 8601


class GroupRule(TypedDict):
    """A single sign-on group rule (issuance/access/oidc_mapping.py) as the API shows it."""

    group: str
    roles: list[str]
    scopes: list[str]


# -- endpoints ------------------------------------------------------------------------------


class EndpointProbe(TypedDict):
    """`Endpoint.last_probe`: what one probe of a server found (issuance/probing/assess.py).

    `match` ties what is served to this Certificate: "current" (its current revision),
    "previous" (an older revision: `revision`, `behind` revisions behind), "foreign" (a
    certificate this Certificate never had), or "error" (nothing read: `errorKind`,
    `error`). The certificate fields are empty on an error.
    """

    probedAt: str  # ISO 8601
    durationMs: int
    match: str  # current, previous, foreign, error
    revision: int | None
    behind: int | None
    error: str
    errorKind: str  # refused, timeout, unresolvable, starttls, handshake, network, ""
    tlsVersion: str
    fingerprintSha256: str  # of the leaf, lower-case hex
    serial: str  # of the leaf, lower-case hex
    subject: str
    issuer: str
    notAfter: str | None  # ISO 8601
    expired: bool
    chainVerified: bool
    chainError: str
    hostnameMatch: bool
    chain: list[str]  # PEM, as served (leaf first)
