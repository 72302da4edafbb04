"""The `acme` part of an Issuer spec: server, account, EAB, and solvers."""

from __future__ import annotations

import base64
import re
from typing import Any, cast

from cryptography import x509

from issuance.shapes import (
    AcmeFallbackServer,
    AcmeIssuerSpec,
    Dns01Spec,
    ExternalAccountBinding,
    Http01GatewayHTTPRouteSpec,
    Http01IngressSpec,
    Http01Spec,
    Rfc2136Spec,
    SolverSelectorSpec,
    SolverSpec,
    WebhookSpec,
)
from issuance.specs import dns_providers
from issuance.specs.errors import Errors
from issuance.specs.fields import (
    check_object,
    decode_base64,
    https_url,
    opt_bool,
    opt_duration,
    opt_list,
    opt_str,
    opt_str_list,
    secret_key_selector,
)
from issuance.specs.labels import validate_labels
from issuance.specs.names import dns_name_problem, email_problem
from issuance.specs.secret_refs import OPAQUE, SecretWrite

ACME_FIELDS = (
    "server",
    "email",
    "privateKeySecretRef",
    "caBundle",
    "skipTLSVerify",
    "externalAccountBinding",
    "profile",
    "preferredChain",
    "disableAccountKeyGeneration",
    "enableDurationFeature",
    "solvers",
    "fallback",
)
FALLBACK_FIELDS = (
    "server",
    "email",
    "externalAccountBinding",
    "profile",
    "caBundle",
    "skipTLSVerify",
)
# More would only delay the answer that every CA is down.
MAX_FALLBACKS = 5
TSIG_ALGORITHMS = ("HMACMD5", "HMACSHA1", "HMACSHA256", "HMACSHA512")
EAB_ALGORITHMS = ("HS256", "HS384", "HS512")
# cert-manager's dns01 blocks dns-lexicon cannot serve (specs/dns_providers.py says why).
DNS01_PROVIDERS_UNSUPPORTED = ("acmeDNS", "akamai")
_NAMESERVER = re.compile(
    r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:\s\[\]]+))(?::(?P<port>\d+))?$"
)


def _ca_bundle(value: Any, where: str, errors: Errors) -> str | None:
    """cert-manager's caBundle is base64 of PEM; a raw PEM is accepted and encoded."""
    if not isinstance(value, str) or not value.strip():
        errors.add(where, "must be a base64-encoded PEM bundle")
        return None
    if "-----BEGIN" in value:
        pem = value.encode()
    else:
        decoded = decode_base64(value, where, errors)
        if decoded is None:
            return None
        pem = decoded
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        certs = []
    if not certs:
        errors.add(where, "does not contain any PEM CERTIFICATE")
        return None
    return base64.b64encode(pem).decode()


def _eab(
    value: Any,
    path: str,
    errors: Errors,
    issuer: str,
    secrets: list[SecretWrite],
    secret_name: str = "",
) -> ExternalAccountBinding | None:
    eab = check_object(value, path, errors, ("keyID", "keySecretRef", "keyAlgorithm", "hmacKey"))
    if eab is None:
        return None
    out: ExternalAccountBinding = {}
    key_id = opt_str(eab, "keyID", path, errors, max_len=1024)
    if eab.get("keyID") is None:
        errors.add(f"{path}.keyID", "is required")
    if key_id:
        out["keyID"] = key_id
    algorithm = opt_str(eab, "keyAlgorithm", path, errors, choices=EAB_ALGORITHMS)
    if algorithm:
        out["keyAlgorithm"] = algorithm
    has_ref, has_inline = "keySecretRef" in eab, "hmacKey" in eab
    if has_ref == has_inline:
        errors.add(path, "set exactly one of keySecretRef (a stored Secret) or hmacKey (inline)")
    elif has_ref:
        ref = secret_key_selector(
            eab["keySecretRef"], f"{path}.keySecretRef", errors, key_required=True
        )
        if ref:
            out["keySecretRef"] = ref
    else:
        hmac = opt_str(eab, "hmacKey", path, errors, max_len=1024)
        if hmac and decode_base64(hmac, f"{path}.hmacKey", errors, urlsafe=True) is not None:
            name = secret_name or f"{issuer}-eab"
            secrets.append(
                SecretWrite(name, f"{path}.hmacKey", type=OPAQUE, data={"secret": hmac.strip()})
            )
            out["keySecretRef"] = {"name": name, "key": "secret"}
    return out


def _selector(value: Any, path: str, errors: Errors) -> SolverSelectorSpec | None:
    sel = check_object(value, path, errors, ("dnsNames", "dnsZones", "matchLabels"))
    if sel is None:
        return None
    out: SolverSelectorSpec = {}
    if sel.get("matchLabels") is not None:
        # Matched against the Certificate's metadata.labels (acme/solvers/selection.py).
        out["matchLabels"] = validate_labels(sel["matchLabels"], f"{path}.matchLabels", errors)
    for key in ("dnsNames", "dnsZones"):
        items = opt_str_list(sel, key, path, errors)
        if items is None:
            continue
        good = []
        for i, item in enumerate(items):
            # dnsNames may hold wildcards, dnsZones may not.
            problem = dns_name_problem(item.lower(), allow_wildcard=key == "dnsNames")
            if problem:
                errors.add(f"{path}.{key}[{i}]", problem)
            else:
                good.append(item.lower())
        out[key] = good
    return out


def _nameserver(value: str, where: str, errors: Errors) -> str | None:
    match = _NAMESERVER.fullmatch(value)  # match()'s $ takes a trailing newline
    port = int(match.group("port")) if match and match.group("port") else 53
    if not match or not 0 < port < 65536:
        errors.add(where, f"must be host, host:port or [IPv6]:port (got {value!r})")
        return None
    return value


def _rfc2136(
    value: Any, path: str, errors: Errors, issuer: str, index: int, secrets: list[SecretWrite]
) -> Rfc2136Spec | None:
    fields = ("nameserver", "tsigKeyName", "tsigAlgorithm", "tsigSecretSecretRef", "tsigSecret")
    obj = check_object(value, path, errors, (*fields, "protocol"))
    if obj is None:
        return None
    out: Rfc2136Spec = {}
    server = opt_str(obj, "nameserver", path, errors, max_len=300)
    if obj.get("nameserver") is None:
        errors.add(f"{path}.nameserver", "is required")
    if server and _nameserver(server, f"{path}.nameserver", errors):
        out["nameserver"] = server
    key_name = opt_str(obj, "tsigKeyName", path, errors, max_len=253)
    if key_name:
        out["tsigKeyName"] = key_name
    algorithm = opt_str(obj, "tsigAlgorithm", path, errors, choices=TSIG_ALGORITHMS)
    if algorithm:
        out["tsigAlgorithm"] = algorithm
    protocol = opt_str(obj, "protocol", path, errors, choices=("TCP", "UDP"))
    if protocol:
        out["protocol"] = protocol
    if "tsigSecretSecretRef" in obj and "tsigSecret" in obj:
        errors.add(path, "set only one of tsigSecretSecretRef or tsigSecret")
    elif "tsigSecretSecretRef" in obj:
        ref = secret_key_selector(
            obj["tsigSecretSecretRef"], f"{path}.tsigSecretSecretRef", errors, key_required=True
        )
        if ref:
            out["tsigSecretSecretRef"] = ref
    elif "tsigSecret" in obj:
        secret = opt_str(obj, "tsigSecret", path, errors, max_len=1024)
        if secret and decode_base64(secret, f"{path}.tsigSecret", errors) is not None:
            name = f"{issuer}-tsig-{index}"
            secrets.append(
                SecretWrite(name, f"{path}.tsigSecret", type=OPAQUE, data={"secret": secret})
            )
            out["tsigSecretSecretRef"] = {"name": name, "key": "secret"}
    if key_name and "tsigSecretSecretRef" not in obj and "tsigSecret" not in obj:
        errors.add(path, "tsigKeyName needs tsigSecretSecretRef or tsigSecret")
    return out


def _webhook(value: Any, path: str, errors: Errors) -> WebhookSpec | None:
    obj = check_object(value, path, errors, ("url", "groupName", "solverName", "config"))
    if obj is None:
        return None
    url = opt_str(obj, "url", path, errors, max_len=1024)
    out: WebhookSpec = {}
    if url is None and obj.get("url") is None:
        # cert-manager's form: stored as written; it runs once ACME_WEBHOOK_SOLVERS maps its
        # groupName/solverName to a URL (until then the Issuer is Ready=False naming it).
        for needed in ("groupName", "solverName"):
            if obj.get(needed) is None:
                errors.add(f"{path}.{needed}", "is required without url")
    elif url is not None and https_url(url, f"{path}.url", errors, allow_http=True):
        out["url"] = url
    for key in ("groupName", "solverName"):
        item = opt_str(obj, key, path, errors, max_len=253)
        if item:
            out[key] = item
    if "config" in obj:
        if isinstance(obj["config"], dict):
            out["config"] = obj["config"]
        else:
            errors.add(f"{path}.config", "must be an object")
    return out


def _dns01(
    value: Any, path: str, errors: Errors, issuer: str, index: int, secrets: list[SecretWrite]
) -> Dns01Spec | None:
    hints = {p: f"{dns_providers.refused_hint(p)}" for p in DNS01_PROVIDERS_UNSUPPORTED}
    own = ("rfc2136", "webhook", *dns_providers.BLOCKS)
    obj = check_object(value, path, errors, (*own, "cnameStrategy"), hints=hints)
    if obj is None:
        return None
    out: Dns01Spec = {}
    strategy = opt_str(obj, "cnameStrategy", path, errors, choices=("None", "Follow"))
    if strategy:
        out["cnameStrategy"] = strategy
    providers = [p for p in own if p in obj]
    if len(providers) != 1:
        if not any(p in obj for p in DNS01_PROVIDERS_UNSUPPORTED):
            errors.add(path, f"set exactly one provider: {', '.join(own)}")
        return out
    provider = providers[0]
    where = f"{path}.{provider}"
    if provider == "rfc2136":
        rfc2136 = _rfc2136(obj["rfc2136"], where, errors, issuer, index, secrets)
        if rfc2136 is not None:
            out["rfc2136"] = rfc2136
    elif provider == "webhook":
        webhook = _webhook(obj["webhook"], where, errors)
        if webhook is not None:
            out["webhook"] = webhook
    else:
        if provider == "lexicon":
            block = dns_providers.validate_lexicon(
                obj[provider], where, errors, issuer, index, secrets
            )
        else:
            block = dns_providers.validate_cert_manager_block(
                provider, obj[provider], where, errors, issuer, index, secrets
            )
        if block is not None:
            # One of the provider blocks of Dns01Spec, all of them option dicts.
            cast("dict[str, Any]", out)[provider] = block
    return out


# cert-manager's settings for the Pods, Service, Ingress or HTTPRoute it creates for HTTP-01.
# They are stored as written (a manifest applies unchanged) but need a cluster: an Issuer with
# them is Ready=False SolverNotUsable (acme/solvers/usability.py).
HTTP01_INGRESS_FIELDS = (
    "class",
    "ingressClassName",
    "name",
    "serviceType",
    "podTemplate",
    "ingressTemplate",
)
HTTP01_GATEWAY_FIELDS = ("serviceType", "labels", "parentRefs", "podTemplate")
HTTP01_SERVICE_TYPES = ("ClusterIP", "NodePort")
HTTP01_LOOSE_OBJECTS = ("podTemplate", "ingressTemplate", "labels")


def _http01_settings(
    value: Any, path: str, errors: Errors, fields: tuple[str, ...]
) -> dict[str, Any] | None:
    """The non-null settings of an ingress/gatewayHTTPRoute block, checked only for shape."""
    obj = check_object(value, path, errors, fields)
    if obj is None:
        return None
    out: dict[str, Any] = {}
    for key in fields:
        if obj.get(key) is None:
            continue
        if key == "serviceType":
            found: Any = opt_str(obj, key, path, errors, choices=HTTP01_SERVICE_TYPES)
        elif key in HTTP01_LOOSE_OBJECTS:
            found = obj[key] if isinstance(obj[key], dict) else None
            if found is None:
                errors.add(f"{path}.{key}", "must be an object")
        elif key == "parentRefs":
            found = opt_list(obj, key, path, errors)
            for i, ref in enumerate(found or []):
                if not isinstance(ref, dict):
                    errors.add(f"{path}.{key}[{i}]", "must be an object")
        else:
            found = opt_str(obj, key, path, errors, max_len=1024)
        if found is not None:
            out[key] = found
    return out


def _http01(value: Any, path: str, errors: Errors) -> Http01Spec | None:
    obj = check_object(value, path, errors, ("ingress", "gatewayHTTPRoute"))
    if obj is None:
        return None
    out: Http01Spec = {}
    if obj.get("ingress") is not None:
        ingress = _http01_settings(obj["ingress"], f"{path}.ingress", errors, HTTP01_INGRESS_FIELDS)
        # An empty block means nothing here (the console answers itself), so it is not kept.
        if ingress:
            out["ingress"] = cast(Http01IngressSpec, ingress)
    if obj.get("gatewayHTTPRoute") is not None:
        route = _http01_settings(
            obj["gatewayHTTPRoute"], f"{path}.gatewayHTTPRoute", errors, HTTP01_GATEWAY_FIELDS
        )
        if route:
            out["gatewayHTTPRoute"] = cast(Http01GatewayHTTPRouteSpec, route)
    return out


SOLVER_FIELDS = ("selector", "http01", "dns01", "waitInsteadOfSelfCheck")


def validate_solvers(
    value: Any, path: str, errors: Errors, issuer: str, secrets: list[SecretWrite]
) -> list[SolverSpec]:
    if not isinstance(value, list):
        errors.add(path, "must be a list")
        return []
    out: list[SolverSpec] = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        solver = check_object(item, where, errors, SOLVER_FIELDS)
        if solver is None:
            continue
        result: SolverSpec = {}
        if "selector" in solver:
            selector = _selector(solver["selector"], f"{where}.selector", errors)
            if selector:
                result["selector"] = selector
        # cert-manager 1.21: no self-check; wait this long after presenting, then answer.
        wait = opt_duration(solver, "waitInsteadOfSelfCheck", where, errors)
        if wait:
            result["waitInsteadOfSelfCheck"] = wait[0]
        kinds = [k for k in ("http01", "dns01") if k in solver]
        if len(kinds) != 1:
            errors.add(where, "set exactly one of http01 or dns01")
        elif kinds[0] == "http01":
            http = _http01(solver["http01"], f"{where}.http01", errors)
            if http is not None:
                result["http01"] = http
        else:
            dns = _dns01(solver["dns01"], f"{where}.dns01", errors, issuer, i, secrets)
            if dns is not None:
                result["dns01"] = dns
        out.append(result)
    return out


def validate_acme(
    value: Any,
    path: str,
    errors: Errors,
    issuer: str,
    secrets: list[SecretWrite],
) -> AcmeIssuerSpec | None:
    acme = check_object(value, path, errors, ACME_FIELDS)
    if acme is None:
        return None
    out: AcmeIssuerSpec = {}
    server = opt_str(acme, "server", path, errors, max_len=1024)
    if acme.get("server") is None:
        errors.add(f"{path}.server", "is required (the ACME directory URL)")
    if server and https_url(server, f"{path}.server", errors):
        out["server"] = server
    email = opt_str(acme, "email", path, errors, max_len=254)
    if email:
        problem = email_problem(email)
        if problem:
            errors.add(f"{path}.email", problem)
        else:
            out["email"] = email
    if "privateKeySecretRef" in acme:
        ref = secret_key_selector(
            acme["privateKeySecretRef"], f"{path}.privateKeySecretRef", errors, key_required=False
        )
        if ref:
            out["privateKeySecretRef"] = ref
    if acme.get("caBundle") is not None:
        bundle = _ca_bundle(acme["caBundle"], f"{path}.caBundle", errors)
        if bundle:
            out["caBundle"] = bundle
    for key in ("skipTLSVerify", "enableDurationFeature"):
        flag = opt_bool(acme, key, path, errors)
        if flag is not None:
            out[key] = flag
    if opt_bool(acme, "disableAccountKeyGeneration", path, errors):
        out["disableAccountKeyGeneration"] = True
        if not isinstance(acme.get("privateKeySecretRef"), dict):
            errors.add(
                f"{path}.privateKeySecretRef",
                "is required with disableAccountKeyGeneration: the account key is read from it",
            )
    for name in ("profile", "preferredChain"):
        item = opt_str(acme, name, path, errors, max_len=256)
        if item:
            out[name] = item
    if "externalAccountBinding" in acme:
        eab = _eab(
            acme["externalAccountBinding"],
            f"{path}.externalAccountBinding",
            errors,
            issuer,
            secrets,
        )
        if eab:
            out["externalAccountBinding"] = eab
    fallback = validate_fallback(acme, path, errors, issuer, secrets)
    if fallback:
        out["fallback"] = fallback
    if opt_list(acme, "solvers", path, errors) is not None:
        out["solvers"] = validate_solvers(
            acme["solvers"], f"{path}.solvers", errors, issuer, secrets
        )
    return out


def _fallback_server(
    value: Any, where: str, errors: Errors, issuer: str, index: int, secrets: list[SecretWrite]
) -> AcmeFallbackServer | None:
    """One entry of `fallback`: another CA to order from (acme/fallback.py)."""
    entry = check_object(value, where, errors, FALLBACK_FIELDS)
    if entry is None:
        return None
    out: AcmeFallbackServer = {}
    server = opt_str(entry, "server", where, errors, max_len=1024)
    if entry.get("server") is None:
        errors.add(f"{where}.server", "is required (the ACME directory URL)")
    if server and https_url(server, f"{where}.server", errors):
        out["server"] = server
    email = opt_str(entry, "email", where, errors, max_len=254)
    if email:
        problem = email_problem(email)
        if problem:
            errors.add(f"{where}.email", problem)
        else:
            out["email"] = email
    profile = opt_str(entry, "profile", where, errors, max_len=256)
    if profile:
        out["profile"] = profile
    if entry.get("caBundle") is not None:
        bundle = _ca_bundle(entry["caBundle"], f"{where}.caBundle", errors)
        if bundle:
            out["caBundle"] = bundle
    flag = opt_bool(entry, "skipTLSVerify", where, errors)
    if flag is not None:
        out["skipTLSVerify"] = flag
    if "externalAccountBinding" in entry:
        eab = _eab(
            entry["externalAccountBinding"],
            f"{where}.externalAccountBinding",
            errors,
            issuer,
            secrets,
            secret_name=f"{issuer}-eab-fallback-{index}",
        )
        if eab:
            out["externalAccountBinding"] = eab
    return out


def validate_fallback(
    acme: dict[str, Any], path: str, errors: Errors, issuer: str, secrets: list[SecretWrite]
) -> list[AcmeFallbackServer] | None:
    """`fallback: [{server, email, externalAccountBinding, profile, caBundle?,
    skipTLSVerify?}]`: further ACME servers, asked in order when the ones before them are
    unreachable, paused or refuse the order."""
    items = opt_list(acme, "fallback", path, errors)
    if items is None:
        return None
    where = f"{path}.fallback"
    if len(items) > MAX_FALLBACKS:
        errors.add(where, f"at most {MAX_FALLBACKS} fallback servers")
        return None
    seen = {str(acme.get("server") or "")}
    out = []
    for i, item in enumerate(items):
        entry = _fallback_server(item, f"{where}[{i}]", errors, issuer, i, secrets)
        if entry is None:
            continue
        if entry.get("server") in seen:
            errors.add(f"{where}[{i}].server", "is already listed (each server once)")
            continue
        seen.add(str(entry.get("server") or ""))
        out.append(entry)
    return out
