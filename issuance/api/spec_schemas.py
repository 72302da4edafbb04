"""The OpenAPI shapes of the resources' `spec`s, built from the validators' own definitions.

The validators (issuance/specs/, issuance/approval/spec.py) are code, not declarations; what
they check field by field is read from their constants here (field lists, enums, key sizes,
limits), so a field or a choice added there shows up in the schema (tests/api/
test_spec_schemas.py checks both agree: whatever the schema allows, the validator takes, and
whatever the validator takes, the schema allows, apart from what JSON Schema cannot say).

The constraints are cert-manager's CRD schemas' (required fields, enums, `oneOf` issuer kinds
and solvers) as far as this product takes them, plus the product's own checks: name, DNS name,
e-mail and duration patterns, key algorithms and sizes, lengths. Where the product is more
lenient than cert-manager (a Certificate's secretName defaults to its name; an ACME issuer's
privateKeySecretRef defaults), the schema says what the product takes.

The dialect is OpenAPI 3.0 (drf-spectacular's): `nullable: true` where the validator treats
null like an absent field (and a nullable enum lists null, as OpenAPI 3.0.3 asks).

What JSON Schema cannot say stays with the validators, each answered 400 naming the field:
that a referenced issuer exists, that PEM text (a CSR, a CA certificate, a CA
bundle, a private key) parses and matches, that DNS names and IP addresses are unique once
normalized (lower-cased, compressed), that renewBefore is below duration, that a duration is
at most 100 years, that a cron expression matches a date, that a regular expression or a
CIDR parses, that a URI parses, and a dns-lexicon provider's own options.
"""

from __future__ import annotations

import copy
import zoneinfo
from functools import cache
from typing import Any

from issuance.acme import issuer_spec as acme_spec
from issuance.acme.solvers import dnsproviders
from issuance.approval.checks import APPROVE_CHECKS, DENY_MATCHERS
from issuance.approval.spec import MAX_DENY_RULES
from issuance.models.base import NAME_RE
from issuance.pki.csr import MAX_CSR_PEM_BYTES
from issuance.pki.keys import ECDSA_CURVES, RSA_SIZES
from issuance.pki.signing import SUPPORTED_USAGES
from issuance.specs import (
    certificate,
    certificaterequest,
    dns_providers,
    extra_names,
    issuer,
    outputs,
)
from issuance.specs import labels as label_rules
from issuance.specs import renewal as renewal_spec
from issuance.specs.names import MAX_DNS_NAME
from issuance.timing.durations import MAX_SECONDS

Schema = dict[str, Any]

NAME_MAX_LENGTH = 253
# An RFC 1123 label; the validator lower-cases DNS names before checking, so either case.
_LABEL = "[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?"
# A top-level label of digits only is refused (it would be an IP address).
_NUMERIC_TLD = {"pattern": "(^|[.@])[0-9]+$"}
# What Python's str.strip() and re's \s take for white space (ECMAScript's \s, which
# schema validators use, is another set): spelled out, so both sides agree.
WHITESPACE = "\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
# Go durations ("2160h", "1h30m", "90s"); parse_duration strips spaces and takes a '+'. At
# least 1s: one part is a whole hour, minute or second (what it cannot say: 0.5s500ms is 1s
# too; a duration of more than 100 years is refused).
_DURATION_PART = "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)"
_WHOLE_SECOND = "0*[1-9][0-9]*(\\.[0-9]*)?(h|m|s)"
DURATION_PATTERN = (
    f"^[{WHITESPACE}]*\\+?({_DURATION_PART})*{_WHOLE_SECOND}({_DURATION_PART})*[{WHITESPACE}]*$"
)
# PEM text, or base64 of it (what cert-manager's YAML carries); whether it parses is the
# server's to check.
PEM_OR_BASE64 = (
    f"-----BEGIN |^[{WHITESPACE}A-Za-z0-9+/=]*[A-Za-z0-9+/=][{WHITESPACE}A-Za-z0-9+/=]*$"
)
EMAIL_LOCAL = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}"
ABSOLUTE_URI = f"^[A-Za-z][A-Za-z0-9+.-]*:[^{WHITESPACE}?#][^{WHITESPACE}]*$"


def string(
    *,
    nullable: bool = True,
    max_length: int | None = None,
    min_length: int = 1,
    pattern: str | None = None,
    description: str | None = None,
    refuse: Schema | None = None,
    **extra: Any,
) -> Schema:
    """A string field; nullable by default, as opt_str treats null like an absent field, and
    never empty (opt_str refuses "")."""
    out: Schema = {"type": "string", "minLength": min_length, **extra}
    if max_length is not None:
        out["maxLength"] = max_length
    if pattern is not None:
        out["pattern"] = pattern
    if nullable:
        out["nullable"] = True
    if description:
        out["description"] = description
    if refuse is not None:
        out["not"] = refuse
    return out


def enum(choices: Any, *, nullable: bool = True, description: str | None = None) -> Schema:
    values: list[Any] = list(choices)
    out: Schema = {"type": "string", "enum": [*values, None] if nullable else values}
    if nullable:
        out["nullable"] = True
    if description:
        out["description"] = description
    return out


def integer(
    *, minimum: int | None = None, maximum: int | None = None, nullable: bool = True
) -> Schema:
    out: Schema = {"type": "integer"}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    if nullable:
        out["nullable"] = True
    return out


def boolean(*, nullable: bool = True, description: str | None = None) -> Schema:
    out: Schema = {"type": "boolean"}
    if nullable:
        out["nullable"] = True
    if description:
        out["description"] = description
    return out


def array(
    items: Schema, *, nullable: bool = True, unique: bool = False, max_items: int | None = None
) -> Schema:
    out: Schema = {"type": "array", "items": items}
    if unique:
        out["uniqueItems"] = True
    if max_items is not None:
        out["maxItems"] = max_items
    if nullable:
        out["nullable"] = True
    return out


def obj(
    properties: dict[str, Schema],
    *,
    required: tuple[str, ...] = (),
    nullable: bool = False,
    description: str | None = None,
    refuse: Schema | None = None,
    **extra: Any,
) -> Schema:
    """An object whose unknown fields are refused (check_object). `required` fields must be
    present and not null (the validators' "is required")."""
    properties = {k: non_null(v) if k in required else v for k, v in properties.items()}
    out: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    if nullable:
        out["nullable"] = True
    if description:
        out["description"] = description
    if refuse is not None:
        out["not"] = refuse  # a JSON Schema keyword, not a Python name
    out.update(extra)
    return out


def non_null(schema: Schema) -> Schema:
    """`schema` without null: a required field must not be null either."""
    out = {k: v for k, v in schema.items() if k != "nullable"}
    if isinstance(out.get("enum"), list):
        out["enum"] = [v for v in out["enum"] if v is not None]
    return out


def only(fields: tuple[str, ...], schemas: dict[str, Schema]) -> dict[str, Schema]:
    """The schemas of exactly the validator's fields: a field the validator takes that has no
    schema here is an error at import, not a schema that refuses it."""
    missing = [f for f in fields if f not in schemas]
    if missing:
        raise KeyError(f"no schema for the validator's fields {missing}")
    return {f: schemas[f] for f in fields}


def present(*keys: str) -> Schema:
    """The object has every one of `keys`, not null (for anyOf/not combinations)."""
    return {"required": list(keys), "properties": {k: {"not": {"enum": [None]}} for k in keys}}


# -- names and values -----------------------------------------------------------------------


def resource_name(*, nullable: bool = True, description: str | None = None) -> Schema:
    return string(
        nullable=nullable,
        max_length=NAME_MAX_LENGTH,
        pattern=NAME_RE.pattern,
        description=description,
    )


def dns_name(*, wildcard: bool = True) -> Schema:
    prefix = r"(\*\.)?" if wildcard else ""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_DNS_NAME,
        "pattern": f"^{prefix}{_LABEL}(\\.{_LABEL})*$",
        "not": _NUMERIC_TLD,
    }


def email(*, max_length: int = 1024, nullable: bool = False) -> Schema:
    out = {
        "type": "string",
        "maxLength": max_length,
        "pattern": f"^{EMAIL_LOCAL}@{_LABEL}(\\.{_LABEL})*$",
        "not": _NUMERIC_TLD,
    }
    if nullable:
        out["nullable"] = True
    return out


def duration(description: str = "A Go duration such as 2160h or 90m, at least 1s.") -> Schema:
    return string(pattern=DURATION_PATTERN, description=description)


def http_url(*, allow_http: bool, nullable: bool = True) -> Schema:
    schemes = "[hH][tT][tT][pP][sS]?" if allow_http else "[hH][tT][tT][pP][sS]"
    # A host (or [IPv6 address]) and an optional port; no user name.
    host = f"(\\[[0-9a-fA-F:.]+\\]|[^{WHITESPACE}/?#@:\\[\\]]+)(:[^{WHITESPACE}/?#@\\[\\]]*)?"
    return string(
        nullable=nullable,
        max_length=1024,
        pattern=f"^{schemes}://{host}([/?#][^{WHITESPACE}]*)?$",
    )


def secret_key_selector(*, key_required: bool, nullable: bool = False) -> Schema:
    """cert-manager's SecretKeySelector: a stored Secret (which the server checks exists)."""
    return obj(
        {
            "name": resource_name(nullable=False),
            "key": string(nullable=not key_required, max_length=253),
        },
        required=("name", "key") if key_required else ("name",),
        nullable=nullable,
        description="A key of a stored Secret.",
    )


def issuer_ref() -> Schema:
    return obj(
        {
            "name": resource_name(nullable=False, description="An existing issuer's name."),
            "kind": enum(certificate.ISSUER_KINDS, description="Issuer (the default)."),
            "group": enum((certificate.ISSUER_GROUP,)),
        },
        required=("name",),
    )


def usages() -> Schema:
    return array(enum(sorted(SUPPORTED_USAGES), nullable=False), unique=True)


# -- Certificate ------------------------------------------------------------------------------


def _private_key() -> Schema:
    def key_type(algorithms: tuple[Any, ...], sizes: list[Any]) -> Schema:
        return {
            "properties": {
                "algorithm": {"enum": list(algorithms)},
                "size": {"enum": [*sizes, None]},
            }
        }

    return obj(
        {
            "algorithm": enum(certificate.KEY_ALGORITHMS, description="RSA (the default)."),
            "size": integer(minimum=0),
            "rotationPolicy": enum(certificate.ROTATION_POLICIES),
            "encoding": enum(certificate.KEY_ENCODINGS),
        },
        # Sizes by algorithm: RSA (also when algorithm is left out) in bits, ECDSA as the
        # curve's bits, Ed25519 none.
        anyOf=[
            key_type(("RSA", None), list(RSA_SIZES)),
            {**key_type(("ECDSA",), list(ECDSA_CURVES)), "required": ["algorithm"]},
            {**key_type(("Ed25519",), [0]), "required": ["algorithm"]},
        ],
    )


def _renewal() -> Schema:
    window = obj(
        {
            "cron": string(
                nullable=False, max_length=200, description="A cron expression: 0 2 * * 1-5."
            ),
            "timezone": enum(
                sorted(zoneinfo.available_timezones()), description="An IANA time zone (UTC)."
            ),
            "windowDuration": {**duration(), "nullable": False},
        },
        required=("cron", "windowDuration"),
    )
    return obj(
        only(
            renewal_spec.RENEWAL_FIELDS,
            {
                "policy": enum(renewal_spec.POLICIES),
                "windows": {
                    "nullable": True,
                    "description": "Renewal windows (one may be given as an object).",
                    "oneOf": [
                        array(window, nullable=False, max_items=renewal_spec.MAX_WINDOWS),
                        window,
                    ],
                },
            },
        ),
        nullable=True,
    )


def _keystores() -> Schema:
    common = {
        "create": boolean(nullable=False),
        "passwordSecretRef": secret_key_selector(key_required=True),
    }
    kinds = {
        "pkcs12": {**common, "profile": enum(outputs.PKCS12_PROFILES)},
        "jks": {**common, "alias": string(max_length=253)},
    }
    return obj(
        {
            kind: obj(
                only(outputs.KEYSTORE_FIELDS[kind], kinds[kind]),
                required=("create", "passwordSecretRef"),
                nullable=True,
            )
            for kind in outputs.KEYSTORE_FIELDS
        },
        nullable=True,
    )


def _san_list(items: Schema) -> Schema:
    return array(items, unique=True)


def _other_names() -> Schema:
    return array(
        obj(
            {
                "oid": string(
                    nullable=False, max_length=256, pattern=r"^[0-2](\.(0|[1-9][0-9]*))+$"
                ),
                "utf8Value": string(nullable=False, max_length=extra_names.MAX_OTHER_NAME_VALUE),
            },
            required=("oid", "utf8Value"),
        )
    )


def labels_schema(description: str, *, patch: bool = False) -> Schema:
    """Kubernetes labels: an object of label values (a merge patch's may be null: it removes
    the label). OpenAPI 3.0 has no propertyNames, so the key's syntax is only described."""
    value: Schema = {
        "type": "string",
        "maxLength": label_rules.MAX_VALUE,
        "pattern": label_rules.VALUE_PATTERN,
    }
    if patch:
        value["nullable"] = True
    return {
        "type": "object",
        "additionalProperties": value,
        "description": f"{description} Keys: {label_rules.KEY_RULE}; values: "
        f"{label_rules.VALUE_RULE}.",
    }


def _secret_template() -> Schema:
    def string_map(description: str) -> Schema:
        return {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "nullable": True,
            "description": description,
        }

    return obj(
        {
            "labels": string_map("Kubernetes labels for the exported Secret."),
            "annotations": string_map("Kubernetes annotations for the exported Secret."),
        },
        nullable=True,
    )


def _name_constraints() -> Schema:
    host = f"{_LABEL}(\\.{_LABEL})*"
    domain = f"\\.?{host}"
    lists = {
        "dnsDomains": string(nullable=False, max_length=MAX_DNS_NAME + 1, pattern=f"^{domain}$"),
        "ipRanges": string(nullable=False, max_length=64, pattern="^[0-9A-Fa-f:.]+/[0-9]{1,3}$"),
        "emailAddresses": string(
            nullable=False, max_length=1024, pattern=f"^({EMAIL_LOCAL}@{host}|{domain})$"
        ),
        "uriDomains": string(nullable=False, max_length=MAX_DNS_NAME + 1, pattern=f"^{domain}$"),
    }
    for key in ("dnsDomains", "emailAddresses", "uriDomains"):
        lists[key]["not"] = _NUMERIC_TLD
    item = obj({k: array(v) for k, v in lists.items()}, nullable=True)
    return obj(
        {"critical": boolean(), "permitted": item, "excluded": item},
        nullable=True,
        description="Only with isCA; at least one name in permitted or excluded.",
    )


def certificate_spec() -> Schema:
    """cert-manager's CertificateSpec as this product takes it (issuance/specs/certificate.py)."""
    subject = obj(
        {
            **{k: array(string(nullable=False, max_length=64)) for k in certificate.SUBJECT_LISTS},
            "serialNumber": string(max_length=64),
        }
    )
    subject["properties"]["countries"] = array(
        {"type": "string", "pattern": "^[A-Za-z]{2}$", "description": "ISO 3166 code."}
    )
    fields = {
        "secretName": resource_name(description="The stored key pair's name (the name)."),
        "commonName": string(max_length=certificate.MAX_COMMON_NAME),
        "dnsNames": _san_list(dns_name()),
        "ipAddresses": _san_list(
            {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}
        ),
        "uris": _san_list({"type": "string", "maxLength": 1024, "pattern": ABSOLUTE_URI}),
        "emailAddresses": _san_list(email()),
        "subject": subject,
        "duration": duration("A Go duration (default 2160h)."),
        "renewBefore": duration("Below duration; or renewBeforePercentage."),
        "renewBeforePercentage": integer(minimum=1, maximum=99),
        "issuerRef": issuer_ref(),
        "privateKey": _private_key(),
        "usages": usages(),
        "isCA": boolean(),
        "revisionHistoryLimit": integer(minimum=1),
        "encodeUsagesInRequest": boolean(),
        "secretExport": obj(
            {"namespace": resource_name(nullable=False), "name": resource_name(nullable=False)},
            required=("namespace", "name"),
            description="Also write the key pair to this Kubernetes Secret.",
        ),
        "renewal": _renewal(),
        "additionalOutputFormats": array(
            obj({"type": enum(outputs.OUTPUT_FORMAT_TYPES, nullable=False)}, required=("type",)),
            unique=True,
        ),
        "keystores": _keystores(),
        "otherNames": _other_names(),
        "nameConstraints": _name_constraints(),
        "secretTemplate": _secret_template(),
    }
    # At least one name; each SAN list's items are checked above.
    names: list[Schema] = [
        {"required": ["commonName"], "properties": {"commonName": {"type": "string"}}}
    ]
    names += [
        {"required": [k], "properties": {k: {"type": "array", "minItems": 1}}}
        for k in certificate.SAN_FIELDS
        if k != "commonName"
    ]
    return obj(
        only(certificate.FIELDS, fields),
        required=("issuerRef",),
        description="cert-manager's Certificate spec. Needs a commonName or a SAN.",
        anyOf=names,
        # renewBefore and renewBeforePercentage are exclusive.
        refuse=present("renewBefore", "renewBeforePercentage"),
    )


# -- CertificateRequest -----------------------------------------------------------------------


def certificate_request_spec() -> Schema:
    fields = {
        "request": string(
            nullable=False,
            max_length=MAX_CSR_PEM_BYTES * 2,
            pattern=PEM_OR_BASE64,
            description="A PEM CERTIFICATE REQUEST (or base64 of one, as in cert-manager).",
        ),
        "issuerRef": issuer_ref(),
        "duration": duration(),
        "usages": usages(),
        "isCA": boolean(),
        "expirationSeconds": integer(
            minimum=certificaterequest.MIN_EXPIRATION_SECONDS, maximum=MAX_SECONDS
        ),
    }
    return obj(
        only(certificaterequest.FIELDS, fields),
        required=("request", "issuerRef"),
        description="cert-manager's CertificateRequest spec (immutable).",
        refuse=present("duration", "expirationSeconds"),
    )


# -- Issuer -----------------------------------------------------------------------------------


def _eab() -> Schema:
    return obj(
        {
            "keyID": string(nullable=False, max_length=1024),
            "keySecretRef": secret_key_selector(key_required=True),
            "keyAlgorithm": enum(acme_spec.EAB_ALGORITHMS),
            "hmacKey": string(
                max_length=1024,
                pattern=f"^[{WHITESPACE}A-Za-z0-9+/_=-]*$",
                description="Inline base64 HMAC key (moved into a Secret).",
            ),
        },
        required=("keyID",),
        oneOf=[{"required": ["keySecretRef"]}, {"required": ["hmacKey"]}],
    )


def _ca_bundle() -> Schema:
    return string(pattern=PEM_OR_BASE64, description="Base64 of PEM certificates (or the PEM).")


def _rfc2136() -> Schema:
    return obj(
        {
            "nameserver": string(
                nullable=False,
                max_length=300,
                pattern=f"^(\\[[0-9a-fA-F:.]+\\]|[^:{WHITESPACE}\\[\\]]+)(:[0-9]+)?$",
                description="host, host:port or [IPv6]:port.",
            ),
            "tsigKeyName": string(max_length=253),
            "tsigAlgorithm": enum(acme_spec.TSIG_ALGORITHMS),
            "tsigSecretSecretRef": secret_key_selector(key_required=True),
            "tsigSecret": string(
                max_length=1024,
                pattern=f"^[{WHITESPACE}A-Za-z0-9+/=]*$",
                description="Inline base64 TSIG secret (moved into a Secret).",
            ),
            "protocol": enum(("TCP", "UDP")),
        },
        required=("nameserver",),
        allOf=[
            {"not": {"required": ["tsigSecretSecretRef", "tsigSecret"]}},
            # A key name needs its secret.
            {
                "anyOf": [
                    {"not": present("tsigKeyName")},
                    {"required": ["tsigSecretSecretRef"]},
                    {"required": ["tsigSecret"]},
                ]
            },
        ],
    )


def _webhook() -> Schema:
    return obj(
        {
            "url": http_url(allow_http=True, nullable=False),
            "groupName": string(max_length=253),
            "solverName": string(max_length=253),
            "config": {"type": "object", "additionalProperties": {}},
        },
        # cert-manager's form (no url) names its solver; ACME_WEBHOOK_SOLVERS gives the URL.
        anyOf=[{"required": ["url"]}, present("groupName", "solverName")],
    )


def _cert_manager_dns_block(key: str) -> Schema:
    """cert-manager's dns01 provider blocks as specs/dns_providers.py takes them; an inline
    credential (e.g. apiToken) may stand for its SecretRef."""
    ref = secret_key_selector(key_required=True)
    inline = dns_providers.INLINE_SECRETS.get(key, {})
    fields: dict[str, Schema] = {}
    for field in dns_providers.CERT_MANAGER_FIELDS[key]:
        fields[field] = ref if field.endswith("SecretRef") else string(max_length=1024)
    fields.pop("auth", None)  # refused: no service account token here
    if key == "route53":
        fields["role"] = string(
            max_length=1024,
            pattern=dns_providers.ROLE_ARN.pattern,
            description="An IAM role assumed through STS before calling Route 53.",
        )
    if "environment" in fields:
        fields["environment"] = enum((dns_providers.AZURE_PUBLIC,))
    if "managedIdentity" in fields:
        # Stored as written; the Issuer reports it not usable here (acme/solvers/usability.py).
        fields["managedIdentity"] = obj(
            {name: string(max_length=1024) for name in ("clientID", "resourceID", "tenantID")}
        )
    for field in inline:
        fields[field] = string(max_length=16 * 1024, description="Inline (moved into a Secret).")
    required = {
        "digitalocean": ("tokenSecretRef",),
        # Without a client secret: managed or workload identity, stored and reported.
        "azureDNS": ("subscriptionID", "resourceGroupName"),
    }.get(key, ())
    out = obj(fields, required=tuple(r for r in required if r not in inline.values()))
    either = [
        {"anyOf": [{"required": [ref_name]}, present(field)]}
        for field, ref_name in inline.items()
        if ref_name in required
    ]
    exclusive = [{"not": {"required": [ref_name, field]}} for field, ref_name in inline.items()]
    rules: list[Schema] = [*either, *exclusive]
    if key == "azureDNS":
        # A service principal (client secret) names its app and tenant, and is not mixed
        # with a managed identity.
        secret = [{"required": ["clientSecretSecretRef"]}, present("clientSecret")]
        rules.append({"anyOf": [{"not": {"anyOf": secret}}, present("clientID", "tenantID")]})
        rules.append({"not": {"allOf": [{"anyOf": secret}, {"required": ["managedIdentity"]}]}})
    if key == "cloudflare":
        token = [{"required": ["apiTokenSecretRef"]}, present("apiToken")]
        api_key = [{"required": ["apiKeySecretRef"]}, present("apiKey")]
        rules.append({"oneOf": [{"anyOf": token}, {"anyOf": api_key}]})
        # A global API key goes with the account's e-mail.
        rules.append({"anyOf": [{"not": {"anyOf": api_key}}, present("email")]})
    if key == "route53":
        access = [{"required": ["accessKeyID"]}, {"required": ["accessKeyIDSecretRef"]}]
        secret = [{"required": ["secretAccessKeySecretRef"]}, present("secretAccessKey")]
        rules.append({"not": {"required": ["accessKeyID", "accessKeyIDSecretRef"]}})
        rules.append(
            {
                "oneOf": [
                    {"allOf": [{"anyOf": access}, {"anyOf": secret}]},
                    {"not": {"anyOf": [*access, *secret]}},
                ]
            }
        )
    if rules:
        out["allOf"] = rules
    return out


def _lexicon() -> Schema:
    option = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}
    installed = sorted(p for p, ok in dnsproviders.providers().items() if ok)
    return {
        "type": "object",
        "description": "A dns-lexicon provider and its options (names as lexicon's; each "
        "provider has its own, which the server checks).",
        "properties": {
            "provider": enum(installed, nullable=False),
            "ttl": integer(minimum=1, maximum=86400),
            "zone": string(
                max_length=253,
                pattern=f"^{_LABEL}(\\.{_LABEL})*\\.*$",
                refuse={"pattern": "(^|\\.)[0-9]+\\.*$"},
            ),
            "credentialsSecretRef": obj(
                {
                    "name": resource_name(nullable=False),
                    "key": {
                        "nullable": True,
                        "enum": [None],
                        "description": "Not used: every key of the Secret is an option.",
                    },
                },
                required=("name",),
            ),
            "credentials": {"type": "object", "minProperties": 1, "additionalProperties": option},
        },
        "required": ["provider"],
        "additionalProperties": {
            **option,
            "description": "An option of the provider (a credential goes in credentials).",
        },
        "not": {"required": ["credentialsSecretRef", "credentials"]},
    }


def _dns01() -> Schema:
    providers: dict[str, Schema] = {
        "rfc2136": _rfc2136(),
        "webhook": _webhook(),
        dnsproviders.LEXICON: _lexicon(),
        **{key: _cert_manager_dns_block(key) for key in dnsproviders.CERT_MANAGER_PROVIDERS},
    }
    return obj(
        {**providers, "cnameStrategy": enum(("None", "Follow"))},
        oneOf=[{"required": [p]} for p in providers],
        description="Exactly one DNS provider block.",
    )


def _solver() -> Schema:
    selector = obj(
        {
            "dnsNames": array(dns_name()),
            "dnsZones": array(dns_name(wildcard=False)),
            "matchLabels": {
                **labels_schema(
                    "Labels the Certificate must all have for this solver to be chosen."
                ),
                "nullable": True,
            },
        }
    )
    # cert-manager's cluster settings: only their shape is checked; stored as written, and a
    # non-empty block makes the Issuer Ready=False SolverNotUsable (acme/solvers/usability.py).
    loose: Schema = {"type": "object", "nullable": True, "description": "Stored as written."}
    settings: dict[str, Schema] = {
        "class": string(max_length=1024),
        "ingressClassName": string(max_length=1024),
        "name": string(max_length=1024),
        "serviceType": enum(acme_spec.HTTP01_SERVICE_TYPES),
        "podTemplate": loose,
        "ingressTemplate": loose,
        "labels": loose,
        "parentRefs": array({"type": "object"}),
    }
    not_usable = "Stored, but not usable here (the Issuer is Ready=False SolverNotUsable)."
    http01 = obj(
        {
            "ingress": obj(
                only(acme_spec.HTTP01_INGRESS_FIELDS, settings),
                nullable=True,
                description=f"cert-manager's Ingress settings. {not_usable}",
            ),
            "gatewayHTTPRoute": obj(
                only(acme_spec.HTTP01_GATEWAY_FIELDS, settings),
                nullable=True,
                description=f"cert-manager's HTTPRoute settings. {not_usable}",
            ),
        },
        description="This console answers HTTP-01 itself: {} (or an empty ingress block).",
    )
    return obj(
        {
            "selector": selector,
            "http01": http01,
            "dns01": _dns01(),
            "waitInsteadOfSelfCheck": duration(
                "Skip the self-check: answer the challenge this long after presenting it."
            ),
        },
        oneOf=[{"required": ["http01"]}, {"required": ["dns01"]}],
    )


def _acme_server() -> dict[str, Schema]:
    return {
        "server": http_url(allow_http=False, nullable=False),
        "email": email(max_length=254, nullable=True),
        "caBundle": _ca_bundle(),
        "skipTLSVerify": boolean(),
        "externalAccountBinding": _eab(),
        "profile": string(max_length=256),
    }


def _acme() -> Schema:
    fallback = obj(only(acme_spec.FALLBACK_FIELDS, _acme_server()), required=("server",))
    fields = {
        **_acme_server(),
        "privateKeySecretRef": secret_key_selector(key_required=False),
        "preferredChain": string(max_length=256),
        "disableAccountKeyGeneration": boolean(
            description="Never generate the account key: read it from privateKeySecretRef."
        ),
        "enableDurationFeature": boolean(),
        "solvers": array(_solver()),
        "fallback": array(fallback, max_items=acme_spec.MAX_FALLBACKS),
    }
    # disableAccountKeyGeneration: true needs privateKeySecretRef (where the key is read).
    no_key_ref = {
        "required": ["disableAccountKeyGeneration"],
        "properties": {"disableAccountKeyGeneration": {"enum": [True]}},
        "not": present("privateKeySecretRef"),
    }
    return obj(
        only(acme_spec.ACME_FIELDS, fields),
        required=("server",),
        description="An ACME CA (RFC 8555).",
        refuse=no_key_ref,
    )


def _ca() -> Schema:
    fields = {
        "secretName": resource_name(description="A stored CA key pair."),
        "maxDuration": duration(),
        "generate": boolean(description="Make a CA key pair when the Secret is missing."),
        "commonName": string(max_length=64, description="Of a generated CA."),
        "certificate": string(max_length=64 * 1024, description="Inline PEM CA certificate."),
        "privateKey": string(max_length=64 * 1024, description="Inline PEM private key."),
        "crlDistributionPoint": http_url(allow_http=True),
    }
    inline = {"anyOf": [{"required": ["certificate"]}, {"required": ["privateKey"]}]}
    generate = {"required": ["generate"], "properties": {"generate": {"enum": [True]}}}
    return obj(
        only(issuer_ca_fields(), fields),
        description="A CA key pair: secretName, generate: true, or certificate+privateKey.",
        allOf=[
            {"anyOf": [present("secretName"), generate, inline]},
            {"not": {"allOf": [generate, inline]}},
            {"anyOf": [{"not": inline}, present("certificate", "privateKey")]},
            {"anyOf": [{"not": present("commonName")}, generate]},
        ],
    )


def issuer_ca_fields() -> tuple[str, ...]:
    return issuer.CA_FIELDS


def _approval_policy() -> Schema:
    regex = string(max_length=512, description="A regular expression.")
    cidr = string(
        nullable=False,
        max_length=64,
        pattern="^[0-9a-fA-F:.]+(%[^/]+)?(/[0-9.]+)?$",
        description="A network: 10.0.0.0/8, 2001:db8::/32.",
    )
    cidrs = array(cidr)
    rules = {
        "allowedSignerNames": array(string(nullable=False, max_length=253)),
        "requesterPattern": regex,
        "dnsSanRegex": regex,
        "commonNameMustMatchRequester": boolean(),
        "requireDnsResolvesToIps": boolean(),
        "maxDnsSans": integer(minimum=0, maximum=1000),
        "ipSanCidrs": cidrs,
        "maxExpirationSeconds": integer(minimum=600),
    }
    matchers = {
        "signerNames": array(string(nullable=False, max_length=253)),
        "groups": array(string(nullable=False, max_length=253)),
        "requesterPattern": regex,
        "commonNamePattern": regex,
        "dnsSanRegex": regex,
        "ipSanCidrs": cidrs,
        "expirationSecondsAbove": integer(minimum=0),
    }
    deny_rule = obj(
        {
            "name": string(nullable=False, max_length=100),
            "message": string(max_length=1000),
            **only(tuple(DENY_MATCHERS), matchers),
        },
        required=("name",),
        anyOf=[{"required": [m]} for m in DENY_MATCHERS],
    )
    return obj(
        {
            "autoApprove": enum(("owned", "all", "none"), nullable=False),
            "rules": obj(only(tuple(APPROVE_CHECKS), rules)),
            "deny": array(deny_rule, nullable=False, max_items=MAX_DENY_RULES),
        },
        description="Which CertificateRequests are approved or denied automatically.",
    )


def issuer_spec() -> Schema:
    self_signed = obj(
        {"maxDuration": duration()}, nullable=True, description="Signs with the subject's key."
    )
    return obj(
        {
            "acme": _acme(),
            "ca": _ca(),
            "selfSigned": self_signed,
            "approvalPolicy": _approval_policy(),
        },
        description="cert-manager's Issuer spec: exactly one of acme, ca, selfSigned.",
        oneOf=[{"required": [kind]} for kind in issuer.KINDS],
    )


# -- read only: Order and Challenge -----------------------------------------------------------


def _read(properties: dict[str, Schema]) -> Schema:
    """A read-only spec the controllers write (its fields are there once made from a request;
    nothing is required of it)."""
    return {"type": "object", "properties": properties, "readOnly": True}


def order_spec() -> Schema:
    text = {"type": "string"}
    return _read(
        {
            "request": {**text, "description": "The CertificateRequest's name."},
            "issuerRef": {"type": "object", "properties": {"name": text, "kind": text}},
            "dnsNames": {"type": "array", "items": text},
            "commonName": text,
            "ipAddresses": {"type": "array", "items": text},
            "duration": text,
            "profile": text,
            "replaces": {**text, "description": "ARI: the certificate this order renews."},
        },
    )


def challenge_spec() -> Schema:
    text = {"type": "string"}
    return _read(
        {
            "authorizationURL": text,
            "url": text,
            "dnsName": {**text, "description": "Without '*.'."},
            "wildcard": {"type": "boolean"},
            "type": {"type": "string", "enum": ["http-01", "dns-01"]},
            "token": text,
            "key": {**text, "description": "HTTP-01: key authorization; DNS-01: TXT value."},
            "solver": {"type": "object", "additionalProperties": {}},
            "issuerRef": {"type": "object", "properties": {"name": text, "kind": text}},
        },
    )


def patch_schema(schema: Schema) -> Schema:
    """The shape of a JSON merge patch (RFC 7386) of a spec: any field may be left out or be
    null (it is then removed); nested objects are merged, so what an object needs (its
    required fields, its combinations) is checked on the merged spec, not on the patch;
    strings, numbers and lists keep their constraints (a list replaces the stored one)."""
    if not isinstance(schema, dict):
        return schema
    out: Schema = {}
    is_object = schema.get("type") == "object" or "properties" in schema
    for key, value in schema.items():
        if is_object and key in ("required", "anyOf", "oneOf", "allOf", "not"):
            continue
        if key == "properties":
            out[key] = {k: {**patch_schema(v), "nullable": True} for k, v in value.items()}
            for item in out[key].values():
                if isinstance(item.get("enum"), list) and None not in item["enum"]:
                    item["enum"] = [*item["enum"], None]
        elif key in ("items", "additionalProperties"):
            out[key] = patch_schema(value)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [patch_schema(v) for v in value]
        else:
            out[key] = value
    return out


def stored_certificate_request_spec() -> Schema:
    """A stored CertificateRequest's spec, as answered: the client's part as sent (after
    normalization), and what the server sets from who asked (bootstrap clients, Kubernetes
    CSRs mirrored by the connector), which carry a signerName instead of an issuerRef."""
    schema = certificate_request_spec()
    text = {"type": "string", "readOnly": True}
    schema["properties"].update(
        {
            "username": {**text, "description": "Who asked (set by the server)."},
            "groups": {"type": "array", "items": {"type": "string"}, "readOnly": True},
            "signerName": text,
            "uid": text,
            "requester": {
                "type": "object",
                "readOnly": True,
                "description": "A Certificate's own request: who made it (username, source).",
                "properties": {"username": {"type": "string"}, "source": {"type": "string"}},
            },
        }
    )
    # What the server sets may grow; a client reads the fields it knows.
    schema["additionalProperties"] = True
    del schema["required"]
    del schema["not"]  # stored: expirationSeconds was turned into a duration
    # As stored, whoever made it (the certificates controller, a bootstrap client, a mirrored
    # Kubernetes CSR): PEM text, empty until there is one.
    schema["properties"]["request"] = {"type": "string", "description": "PEM CSR."}
    return schema


# Component name → builder (issuance/api/schema.py registers them when the schema is made).
SPEC_SCHEMAS: dict[str, Any] = {
    "CertificateSpec": certificate_spec,
    "CertificateRequestSpec": certificate_request_spec,
    "StoredCertificateRequestSpec": stored_certificate_request_spec,
    "IssuerSpec": issuer_spec,
    "OrderSpec": order_spec,
    "ChallengeSpec": challenge_spec,
}


@cache
def _built(name: str, patch: bool) -> Schema:
    schema: Schema = SPEC_SCHEMAS[name]()
    return patch_schema(schema) if patch else schema


def spec_schema(name: str, patch: bool = False) -> Schema:
    """The component `name` of SPEC_SCHEMAS (as a merge patch's shape if `patch`): a copy,
    built once (the lexicon block lists the installed dns-lexicon providers)."""
    return copy.deepcopy(_built(name, patch))
