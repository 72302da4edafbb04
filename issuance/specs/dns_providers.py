"""Validation of the dns01 provider blocks dns-lexicon serves: our `lexicon` block and
cert-manager's `cloudflare`, `route53`, `digitalocean`, `azureDNS`, `cloudDNS` (accepted
as written in cert-manager manifests); `acmeDNS` and `akamai` are refused naming the
field. `azureDNS` without a client secret (managed or workload identity) and `cloudDNS`
without a service account key (ambient credentials) are stored as written, and the Issuer
reports them not usable here (AMBIENT_IDENTITY; issuance.acme.solvers.usability). The mapping onto lexicon is issuance/acme/solvers/dnsproviders.py.

Credentials never stay in the spec: cert-manager blocks reference Secrets, and inline
credentials (our extension, for quick setups and the console's password fields: the lexicon
block's `credentials: {auth_token: …}`, or e.g. `cloudflare.apiToken` for
`apiTokenSecretRef`, see INLINE_SECRETS) are moved into an encrypted Secret
`<issuer>-dns-<index>`, the spec keeping the reference.
"""

from __future__ import annotations

import re
from typing import Any

from issuance.acme.solvers import dnsproviders
from issuance.specs.errors import Errors
from issuance.specs.fields import check_object, opt_int, opt_str, secret_key_selector
from issuance.specs.names import dns_name_problem
from issuance.specs.secret_refs import OPAQUE, SecretWrite

# Every dns01 block key this module validates.
BLOCKS = (dnsproviders.LEXICON, *dnsproviders.CERT_MANAGER_PROVIDERS)
AZURE_PUBLIC = "AzurePublicCloud"


def _available(provider: str, path: str, errors: Errors) -> bool:
    problem = dnsproviders.provider_problem(provider)
    if problem:
        errors.add(path, problem)
    return problem is None


def _refs(
    obj: dict[str, Any], keys: tuple[str, ...], path: str, errors: Errors, out: dict[str, Any]
) -> None:
    for key in keys:
        if key in obj:
            ref = secret_key_selector(obj[key], f"{path}.{key}", errors, key_required=True)
            if ref:
                out[key] = ref


def _strings(
    obj: dict[str, Any], keys: tuple[str, ...], path: str, errors: Errors, out: dict[str, Any]
) -> None:
    for key in keys:
        value = opt_str(obj, key, path, errors, max_len=1024)
        if value:
            out[key] = value


def _require(obj: dict[str, Any], keys: tuple[str, ...], path: str, errors: Errors) -> None:
    for key in keys:
        if obj.get(key) is None:
            errors.add(f"{path}.{key}", "is required")


def _cloudflare(obj: dict[str, Any], path: str, errors: Errors) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _strings(obj, ("email",), path, errors, out)
    _refs(obj, ("apiTokenSecretRef", "apiKeySecretRef"), path, errors, out)
    if ("apiTokenSecretRef" in obj) == ("apiKeySecretRef" in obj):
        errors.add(path, "set exactly one of apiTokenSecretRef or apiKeySecretRef")
    elif "apiKeySecretRef" in obj and obj.get("email") is None:
        errors.add(f"{path}.email", "is required with apiKeySecretRef (a global API key)")
    return out


# An IAM role's ARN, in any partition (aws, aws-cn, aws-us-gov).
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$")


def _route53(obj: dict[str, Any], path: str, errors: Errors) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "auth" in obj:
        errors.add(
            f"{path}.auth",
            "unsupported field: there is no Kubernetes service account token here; use "
            "access keys (and role)",
        )
    # region: the boto3 client's region (it selects the partition, e.g. cn-north-1 → aws-cn).
    # role: assumed through STS with the block's (or the worker's) credentials first.
    _strings(obj, ("region", "accessKeyID", "hostedZoneID", "role"), path, errors, out)
    role = out.get("role")
    if role and not ROLE_ARN.fullmatch(role):
        errors.add(
            f"{path}.role", f"{role!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)"
        )
    _refs(obj, ("accessKeyIDSecretRef", "secretAccessKeySecretRef"), path, errors, out)
    if "accessKeyID" in obj and "accessKeyIDSecretRef" in obj:
        errors.add(path, "set only one of accessKeyID or accessKeyIDSecretRef")
    has_key = "accessKeyID" in obj or "accessKeyIDSecretRef" in obj
    if has_key != ("secretAccessKeySecretRef" in obj):
        errors.add(
            path,
            "set an access key (accessKeyID or accessKeyIDSecretRef) together with "
            "secretAccessKeySecretRef, or neither (the worker's AWS environment)",
        )
    return out


def _digitalocean(obj: dict[str, Any], path: str, errors: Errors) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _require(obj, ("tokenSecretRef",), path, errors)
    _refs(obj, ("tokenSecretRef",), path, errors, out)
    return out


def _azure(obj: dict[str, Any], path: str, errors: Errors) -> dict[str, Any]:
    out: dict[str, Any] = {}
    environment = opt_str(obj, "environment", path, errors, max_len=64)
    if environment and environment != AZURE_PUBLIC:
        errors.add(f"{path}.environment", f"only {AZURE_PUBLIC} is supported by lexicon")
    elif environment:
        out["environment"] = environment
    _require(obj, ("subscriptionID", "resourceGroupName"), path, errors)
    if "clientSecretSecretRef" in obj:
        # A service principal: what lexicon's azure provider signs in with.
        _require(obj, ("clientID", "tenantID"), path, errors)
        if "managedIdentity" in obj:
            errors.add(f"{path}.managedIdentity", "set either clientSecretSecretRef or this")
    # Without clientSecretSecretRef: cert-manager's managed or workload identity form. Stored
    # as written; the Issuer reports it not usable here (AMBIENT_IDENTITY, unusable()).
    _strings(
        obj,
        ("clientID", "tenantID", "subscriptionID", "resourceGroupName", "hostedZoneName"),
        path,
        errors,
        out,
    )
    _refs(obj, ("clientSecretSecretRef",), path, errors, out)
    identity = check_object(
        obj.get("managedIdentity", {}),
        f"{path}.managedIdentity",
        errors,
        ("clientID", "resourceID", "tenantID"),
    )
    if identity is not None and "managedIdentity" in obj:
        kept: dict[str, Any] = {}
        _strings(
            identity,
            ("clientID", "resourceID", "tenantID"),
            f"{path}.managedIdentity",
            errors,
            kept,
        )
        out["managedIdentity"] = kept
    return out


def _cloud_dns(obj: dict[str, Any], path: str, errors: Errors) -> dict[str, Any]:
    # Without serviceAccountSecretRef: cert-manager's ambient credentials (GKE metadata
    # server, workload identity). Stored as written; the Issuer reports it not usable here.
    out: dict[str, Any] = {}
    _strings(obj, ("project", "hostedZoneName"), path, errors, out)
    _refs(obj, ("serviceAccountSecretRef",), path, errors, out)
    return out


# Why the ambient-identity forms cannot run here: lexicon signs in only with a key it is given.
AMBIENT_IDENTITY = {
    "azureDNS": (
        "clientSecretSecretRef",
        "managed or workload identity (no clientSecretSecretRef) needs Azure's instance "
        "metadata endpoint or a projected Kubernetes token, which this console does not use; "
        "give a service principal: clientID, tenantID and clientSecretSecretRef",
    ),
    "cloudDNS": (
        "serviceAccountSecretRef",
        "ambient credentials (no serviceAccountSecretRef) need Google's metadata server or "
        "GKE workload identity, which this console does not use; give serviceAccountSecretRef "
        "(a service account key)",
    ),
}


def unusable(key: str, block: Any) -> tuple[str, str] | None:
    """(field, why) when a stored cert-manager block cannot run here, else None."""
    if key in AMBIENT_IDENTITY and isinstance(block, dict):
        field, why = AMBIENT_IDENTITY[key]
        if field not in block:
            return field, why
    return None


CERT_MANAGER_FIELDS: dict[str, tuple[str, ...]] = {
    "cloudflare": ("email", "apiKeySecretRef", "apiTokenSecretRef"),
    "route53": (
        "region",
        "accessKeyID",
        "accessKeyIDSecretRef",
        "secretAccessKeySecretRef",
        "role",
        "hostedZoneID",
        "auth",
    ),
    "digitalocean": ("tokenSecretRef",),
    "azureDNS": (
        "clientID",
        "clientSecretSecretRef",
        "subscriptionID",
        "tenantID",
        "resourceGroupName",
        "hostedZoneName",
        "environment",
        "managedIdentity",
    ),
    "cloudDNS": ("project", "serviceAccountSecretRef", "hostedZoneName"),
}
VALIDATORS = {
    "cloudflare": _cloudflare,
    "route53": _route53,
    "digitalocean": _digitalocean,
    "azureDNS": _azure,
    "cloudDNS": _cloud_dns,
}


# Our extension, like rfc2136's tsigSecret: a credential given inline (e.g. typed into the
# console's password field) instead of its `…SecretRef`, moved into the encrypted Secret
# `<issuer>-dns-<index>` under the inline field's name; the spec keeps the reference.
INLINE_SECRETS: dict[str, dict[str, str]] = {
    "cloudflare": {"apiToken": "apiTokenSecretRef", "apiKey": "apiKeySecretRef"},
    "route53": {"secretAccessKey": "secretAccessKeySecretRef"},
    "digitalocean": {"token": "tokenSecretRef"},
    "azureDNS": {"clientSecret": "clientSecretSecretRef"},
    "cloudDNS": {"serviceAccount": "serviceAccountSecretRef"},
}


def _move_inline_secrets(
    key: str, value: Any, path: str, errors: Errors, secret_name: str
) -> tuple[Any, dict[str, str]]:
    """The block with each inline credential replaced by a reference to `secret_name`,
    and the values to store there."""
    inline = INLINE_SECRETS.get(key, {})
    if not isinstance(value, dict) or not any(k in value for k in inline):
        return value, {}
    block = dict(value)
    data: dict[str, str] = {}
    for field_name, ref_name in inline.items():
        if field_name not in block:
            continue
        secret = opt_str(block, field_name, path, errors, max_len=16 * 1024)
        del block[field_name]
        if ref_name in block:
            errors.add(path, f"set only one of {ref_name} or {field_name}")
        elif secret is not None:
            data[field_name] = secret.strip()
            block[ref_name] = {"name": secret_name, "key": field_name}
    return block, data


def validate_cert_manager_block(
    key: str,
    value: Any,
    path: str,
    errors: Errors,
    issuer: str = "",
    index: int = 0,
    secrets: list[SecretWrite] | None = None,
) -> dict[str, Any] | None:
    secret_name = f"{issuer}-dns-{index}"
    value, inline = _move_inline_secrets(key, value, path, errors, secret_name)
    obj = check_object(value, path, errors, CERT_MANAGER_FIELDS[key])
    if obj is None:
        return None
    if inline and secrets is not None:
        secrets.append(SecretWrite(secret_name, path, type=OPAQUE, data=inline))
    out = VALIDATORS[key](obj, path, errors)
    _available(dnsproviders.CERT_MANAGER_PROVIDERS[key], path, errors)
    return out


def _option_value(value: Any, where: str, errors: Errors) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    errors.add(where, "must be a string, number or boolean")
    return None


def validate_lexicon(
    value: Any, path: str, errors: Errors, issuer: str, index: int, secrets: list[SecretWrite]
) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        errors.add(path, "must be an object")
        return None
    provider = opt_str(value, "provider", path, errors, max_len=64)
    if value.get("provider") is None:
        errors.add(f"{path}.provider", "is required (a dns-lexicon provider, e.g. cloudflare)")
    if not provider or not _available(provider, f"{path}.provider", errors):
        return None
    out: dict[str, Any] = {"provider": provider}
    known = dnsproviders.provider_options(provider)
    for key, item in value.items():
        where = f"{path}.{key}"
        if key in dnsproviders.OWN_OPTIONS:
            continue
        if key not in known:
            plain = sorted(o for o in known if not dnsproviders.is_secret_option(o))
            errors.add(
                where,
                f"unknown option of lexicon's {provider} provider (its options: "
                f"{', '.join(plain) or 'none'}; credentials go in credentialsSecretRef)",
            )
        elif dnsproviders.is_secret_option(key):
            errors.add(where, "is a credential: put it in the credentialsSecretRef Secret")
        else:
            text = _option_value(item, where, errors)
            if text is not None:
                out[key] = text
    ttl = opt_int(value, "ttl", path, errors, minimum=1, maximum=86400)
    if ttl is not None:
        out["ttl"] = ttl
    zone = opt_str(value, "zone", path, errors, max_len=253)
    if zone:
        problem = dns_name_problem(zone.lower().rstrip("."), allow_wildcard=False)
        if problem:
            errors.add(f"{path}.zone", problem)
        else:
            out["zone"] = zone.lower().rstrip(".")
    has_ref, has_inline = "credentialsSecretRef" in value, "credentials" in value
    if has_ref and has_inline:
        errors.add(path, "set only one of credentialsSecretRef or credentials")
    elif has_ref:
        ref = secret_key_selector(
            value["credentialsSecretRef"],
            f"{path}.credentialsSecretRef",
            errors,
            key_required=False,
        )
        if ref and "key" in ref:
            errors.add(
                f"{path}.credentialsSecretRef.key",
                "unsupported field: every key of the Secret is a provider option (e.g. auth_token)",
            )
        elif ref:
            out["credentialsSecretRef"] = ref
    elif has_inline:
        creds = value["credentials"]
        where = f"{path}.credentials"
        if not isinstance(creds, dict) or not creds:
            errors.add(where, "must be an object of provider options, e.g. {auth_token: ...}")
        else:
            data: dict[str, str] = {}
            for key, item in creds.items():
                if key not in known:
                    errors.add(f"{where}.{key}", f"unknown option of lexicon's {provider} provider")
                else:
                    text = _option_value(item, f"{where}.{key}", errors)
                    if text is not None:
                        data[str(key)] = text
            if data:
                name = f"{issuer}-dns-{index}"
                secrets.append(SecretWrite(name, where, type=OPAQUE, data=data))
                out["credentialsSecretRef"] = {"name": name}
    return out


def refused_hint(key: str) -> str | None:
    """Why a cert-manager dns01 block is refused here, or None when it is served."""
    return dnsproviders.REFUSED.get(key)
