"""The issuer form: POSTed fields -> an issuer spec dict (validated by issuance.specs, as
the API does), and a stored spec -> the form's values for editing.

The form never validates a spec itself: it only arranges fields into the spec's shape,
and the SpecError field paths are mapped back to the form field they came from. Secrets
(EAB HMAC key, DNS credentials, the CA private key) are write-only: they go into the spec
through its inline-secret fields (moved into encrypted Secrets by the spec layer), are
never put back into a page, and an empty field on edit keeps the stored reference.
Spec fields the form does not show (approvalPolicy, fallback, preferredChain, ...) are
kept as stored.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from issuance.acme.issuer_spec import TSIG_ALGORITHMS
from issuance.specs.dns_providers import INLINE_SECRETS
from issuance.timing.durations import (
    FRIENDLY_EXAMPLES,
    DurationError,
    describe_go_duration,
    go_duration,
    parse_friendly_duration,
)


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    url: str
    needs_eab: bool = False


PRESETS = (
    Preset(
        "letsencrypt",
        "Let's Encrypt (production)",
        "https://acme-v02.api.letsencrypt.org/directory",
    ),
    Preset(
        "letsencrypt-staging",
        "Let's Encrypt (staging)",
        "https://acme-staging-v02.api.letsencrypt.org/directory",
    ),
    Preset("zerossl", "ZeroSSL", "https://acme.zerossl.com/v2/DV90", needs_eab=True),
    Preset(
        "google",
        "Google Trust Services",
        "https://dv.acme-v02.api.pki.goog/directory",
        needs_eab=True,
    ),
    Preset("buypass", "Buypass", "https://api.buypass.com/acme/directory"),
)
PRESETS_BY_KEY = {p.key: p for p in PRESETS}
CUSTOM = "custom"
KINDS = (("acme", "ACME"), ("ca", "CA"), ("selfSigned", "Self-signed"))
CA_MODES = (
    ("generate", "Generate a new CA"),
    ("upload", "Upload a certificate and key (PEM)"),
    ("keep", "Keep the stored CA key pair"),
)
_LEXICON_OWN = ("provider", "credentialsSecretRef", "credentials")
MIN_SOLVER_SLOTS = 2
MAX_SOLVER_SLOTS = 10


@dataclass(frozen=True)
class FieldDef:
    """One provider field: `key` in the spec block; `secret`: write-only, given inline under
    `key` and stored as `ref` (a …SecretRef) by the spec layer."""

    key: str
    label: str
    secret: bool = False
    ref: str = ""
    choices: tuple[str, ...] = ()
    help: str = ""


def _secret(provider: str, key: str, label: str, help: str = "") -> FieldDef:
    return FieldDef(key, label, secret=True, ref=INLINE_SECRETS[provider][key], help=help)


PROVIDERS: dict[str, tuple[FieldDef, ...]] = {
    "rfc2136": (
        FieldDef("nameserver", "Nameserver", help="host:port of the primary, e.g. ns1:53"),
        FieldDef("tsigKeyName", "TSIG key name"),
        FieldDef("tsigAlgorithm", "TSIG algorithm", choices=TSIG_ALGORITHMS),
        FieldDef("tsigSecret", "TSIG secret", secret=True, ref="tsigSecretSecretRef"),
    ),
    "webhook": (FieldDef("url", "Webhook URL"),),
    "cloudflare": (
        _secret("cloudflare", "apiToken", "API token"),
        FieldDef("email", "Email", help="only with a global API key"),
        _secret("cloudflare", "apiKey", "Global API key", help="instead of an API token"),
    ),
    "route53": (
        FieldDef("accessKeyID", "Access key ID"),
        _secret("route53", "secretAccessKey", "Secret access key"),
        FieldDef("hostedZoneID", "Hosted zone ID"),
        FieldDef("region", "Region"),
    ),
    "digitalocean": (_secret("digitalocean", "token", "API token"),),
    "azureDNS": (
        FieldDef("clientID", "Client ID"),
        _secret("azureDNS", "clientSecret", "Client secret"),
        FieldDef("subscriptionID", "Subscription ID"),
        FieldDef("tenantID", "Tenant ID"),
        FieldDef("resourceGroupName", "Resource group"),
        FieldDef("hostedZoneName", "Hosted zone"),
    ),
    "cloudDNS": (
        FieldDef("project", "Project"),
        _secret("cloudDNS", "serviceAccount", "Service account key (JSON)"),
        FieldDef("hostedZoneName", "Hosted zone"),
    ),
    "lexicon": (
        FieldDef("provider", "lexicon provider", help="e.g. powerdns, gandi, ovh"),
        FieldDef("options", "Options", help="one name=value per line, e.g. pdns_server=http://…"),
        FieldDef("credentialName", "Credential option", help="e.g. auth_token"),
        FieldDef("credentialValue", "Credential value", secret=True, ref="credentialsSecretRef"),
    ),
}
PROVIDER_LABELS = {
    "rfc2136": "RFC 2136 (BIND, Knot, PowerDNS)",
    "webhook": "Webhook",
    "cloudflare": "Cloudflare",
    "route53": "Route 53",
    "digitalocean": "DigitalOcean",
    "azureDNS": "Azure DNS",
    "cloudDNS": "Google Cloud DNS",
    "lexicon": "Other (dns-lexicon provider)",
}


def preset_of(server: str) -> str:
    return next((p.key for p in PRESETS if p.url == server), CUSTOM if server else PRESETS[1].key)


def _lines(text: str) -> list[str]:
    return [p.strip() for chunk in text.splitlines() for p in chunk.split(",") if p.strip()]


def _get(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return str(value).strip() if value is not None else ""


@dataclass
class SolverValues:
    """One solver slot's values as the form shows them (secrets only as "is set")."""

    index: int
    type: str = ""
    provider: str = ""
    dns_zones: str = ""
    dns_names: str = ""
    match_labels: str = ""  # "team=payments, env=prod"
    follow_cname: bool = False
    values: dict[str, str] = field(default_factory=dict)
    secrets_set: set[str] = field(default_factory=set)


# -- POST -> spec -----------------------------------------------------------------------


def slot_count(data: Mapping[str, Any]) -> int:
    try:
        count = int(_get(data, "solver_slots") or MIN_SOLVER_SLOTS)
    except ValueError:
        count = MIN_SOLVER_SLOTS
    return max(1, min(count, MAX_SOLVER_SLOTS))


def _provider_block(
    provider: str, data: Mapping[str, Any], prefix: str, old: Mapping[str, Any]
) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if provider == "lexicon":
        block["provider"] = _get(data, prefix + "provider")
        for line in str(data.get(prefix + "options") or "").splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip():
                text = value.strip()
                # ttl is a number in the spec; every other option is text.
                block[name.strip()] = (
                    int(text) if name.strip() == "ttl" and text.isdigit() else text
                )
            elif line.strip():
                # Left to the spec layer to name: an option without a value.
                block[line.strip()] = ""
        cred_name = _get(data, prefix + "credentialName") or "auth_token"
        cred_value = _get(data, prefix + "credentialValue")
        if cred_value:
            block["credentials"] = {cred_name: cred_value}
        elif old.get("credentialsSecretRef"):
            block["credentialsSecretRef"] = old["credentialsSecretRef"]
        return block
    for item in PROVIDERS[provider]:
        value = _get(data, prefix + item.key)
        if item.secret:
            if value:
                block[item.key] = value
            elif old.get(item.ref):
                block[item.ref] = old[item.ref]
        elif value:
            block[item.key] = value
    return block


def _match_labels(text: str) -> dict[str, str]:
    """`key=value` items (commas or lines) as selector.matchLabels; an item without `=` is
    a key with an empty value. The spec layer checks each key and value."""
    out: dict[str, str] = {}
    for item in _lines(text):
        key, _, value = item.partition("=")
        out[key.strip()] = value.strip()
    return out


def _solvers(data: Mapping[str, Any], old_solvers: list[Any]) -> list[dict[str, Any]]:
    """The solvers from the form's slots. Each starts from the stored solver in its slot, so
    what the form has no input for (waitInsteadOfSelfCheck, HTTP-01 ingress settings, a
    provider's fields the form does not show, a cert-manager-form webhook) survives an edit;
    the form's own inputs replace theirs."""
    solvers = []
    for i in range(slot_count(data)):
        prefix = f"solver-{i}-"
        kind = _get(data, prefix + "type")
        if kind not in ("http01", "dns01"):
            continue
        old = old_solvers[i] if i < len(old_solvers) and isinstance(old_solvers[i], dict) else {}
        solver: dict[str, Any] = copy.deepcopy(old)
        old_selector = solver.get("selector")
        selector: dict[str, Any] = dict(old_selector) if isinstance(old_selector, dict) else {}
        for key, name in (("dnsZones", "dns_zones"), ("dnsNames", "dns_names")):
            items = _lines(str(data.get(prefix + name) or ""))
            if items:
                selector[key] = items
            else:
                selector.pop(key, None)
        labels = _match_labels(str(data.get(prefix + "match_labels") or ""))
        if labels:
            selector["matchLabels"] = labels
        else:
            selector.pop("matchLabels", None)
        if selector:
            solver["selector"] = selector
        else:
            solver.pop("selector", None)
        if kind == "http01":
            solver.pop("dns01", None)
            if not isinstance(solver.get("http01"), dict):
                solver["http01"] = {}
        else:
            solver.pop("http01", None)
            solver["dns01"] = _dns01(data, prefix, old.get("dns01"))
        solvers.append(solver)
    return solvers


def _dns01(data: Mapping[str, Any], prefix: str, old: Any) -> dict[str, Any]:
    """A solver's dns01 block from its slot, over the stored one (`old`). A provider the form
    does not offer (e.g. azureDNS) shows as none picked and is kept as stored."""
    old_dns01: dict[str, Any] = dict(old) if isinstance(old, dict) else {}
    provider = _get(data, prefix + "provider")
    old_provider = next((p for p in old_dns01 if p != "cnameStrategy"), "")
    if provider in PROVIDERS:
        old_block = old_dns01.get(provider) if provider == old_provider else None
        old_block = old_block if isinstance(old_block, dict) else {}
        block = _provider_block(provider, data, f"{prefix}{provider}-", old_block)
        if provider != "lexicon":  # lexicon's options are all shown: the form has them all
            shown = {key for item in PROVIDERS[provider] for key in (item.key, item.ref) if key}
            block = {**{k: v for k, v in old_block.items() if k not in shown}, **block}
        dns01: dict[str, Any] = {provider: block}
    elif old_provider and old_provider not in PROVIDERS:
        dns01 = {old_provider: copy.deepcopy(old_dns01[old_provider])}
    else:
        dns01 = {}
    if data.get(prefix + "follow_cname"):
        dns01["cnameStrategy"] = "Follow"
    return dns01


def _acme(data: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    acme = copy.deepcopy(dict(old))
    preset = PRESETS_BY_KEY.get(_get(data, "preset"))
    server = preset.url if preset else _get(data, "server")
    for key, value in (
        ("server", server),
        ("email", _get(data, "email")),
        ("profile", _get(data, "profile")),
        ("caBundle", _get(data, "ca_bundle") if not preset else ""),
    ):
        if value:
            acme[key] = value
        else:
            acme.pop(key, None)
    key_id = _get(data, "eab_key_id")
    hmac = _get(data, "eab_hmac_key")
    old_eab = old.get("externalAccountBinding")
    old_eab = old_eab if isinstance(old_eab, dict) else {}
    if key_id or hmac:
        eab: dict[str, Any] = {"keyID": key_id} if key_id else {}
        algorithm = _get(data, "eab_algorithm")
        if algorithm and algorithm != "HS256":
            eab["keyAlgorithm"] = algorithm
        if hmac:
            eab["hmacKey"] = hmac
        elif old_eab.get("keySecretRef"):
            eab["keySecretRef"] = old_eab["keySecretRef"]
        acme["externalAccountBinding"] = eab
    else:
        acme.pop("externalAccountBinding", None)
    old_solvers = old.get("solvers")
    acme["solvers"] = _solvers(data, old_solvers if isinstance(old_solvers, list) else [])
    return acme


def _ca(data: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    mode = _get(data, "ca_mode")
    # Only what describes where the key pair comes from is replaced.
    ca = {
        k: v
        for k, v in old.items()
        if k not in ("generate", "commonName", "certificate", "privateKey", "secretName")
    }
    if mode == "generate":
        ca["generate"] = True
        if _get(data, "ca_common_name"):
            ca["commonName"] = _get(data, "ca_common_name")
        if old.get("secretName"):
            # Never written over the Secret of an uploaded CA; a generated one is kept
            # (generate only makes a CA when its Secret does not exist).
            suffix = "" if old.get("generate") else "-generated"
            ca["secretName"] = f"{old['secretName']}{suffix}"
    elif mode == "upload":
        for key, name in (("certificate", "ca_certificate"), ("privateKey", "ca_private_key")):
            value = str(data.get(name) or "").strip()
            ca[key] = value + "\n" if value else None
        if old.get("secretName"):
            ca["secretName"] = old["secretName"]
    elif old.get("secretName"):
        ca["secretName"] = old["secretName"]
        if old.get("generate"):
            ca["generate"] = True
            if old.get("commonName"):
                ca["commonName"] = old["commonName"]
    max_duration = _max_duration(data)
    if max_duration:
        ca["maxDuration"] = max_duration
    else:
        ca.pop("maxDuration", None)
    return ca


def _max_duration(data: Mapping[str, Any]) -> str:
    """The maximum duration as typed ("365 days", "8760h") in the Go form
    the spec keeps; what does not parse goes to the spec's validator, whose error is shown
    beside the field."""
    typed = _get(data, "max_duration")
    try:
        return go_duration(parse_friendly_duration(typed)) if typed else ""
    except DurationError:
        return typed


def _described(value: object) -> str:
    return describe_go_duration(value) if value else ""


def spec_from_post(data: QueryDict | Mapping[str, Any], old_spec: Mapping[str, Any]) -> Any:
    """The issuer spec these POSTed fields describe, on top of the stored spec `old_spec`
    ({} for a new issuer): fields the form does not show are kept."""
    kind = _get(data, "kind")
    spec: dict[str, Any] = {k: v for k, v in old_spec.items() if k == "approvalPolicy"}
    old_block = old_spec.get(kind)
    old_block = old_block if isinstance(old_block, dict) else {}
    if kind == "acme":
        spec["acme"] = _acme(data, old_block)
    elif kind == "ca":
        spec["ca"] = _ca(data, old_block)
    elif kind == "selfSigned":
        block = dict(old_block)
        max_duration = _max_duration(data)
        if max_duration:
            block["maxDuration"] = max_duration
        else:
            block.pop("maxDuration", None)
        spec["selfSigned"] = block
    return spec


# -- spec -> form values ----------------------------------------------------------------


def _solver_values(index: int, solver: Any) -> SolverValues:
    out = SolverValues(index)
    if not isinstance(solver, dict):
        return out
    selector = solver.get("selector") or {}
    out.dns_zones = "\n".join(str(z) for z in selector.get("dnsZones") or [])
    out.dns_names = "\n".join(str(n) for n in selector.get("dnsNames") or [])
    labels = selector.get("matchLabels") or {}
    out.match_labels = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
    if "http01" in solver:
        out.type = "http01"
        return out
    dns01 = solver.get("dns01")
    if not isinstance(dns01, dict):
        return out
    out.type = "dns01"
    out.follow_cname = dns01.get("cnameStrategy") == "Follow"
    provider = next((p for p in PROVIDERS if p in dns01), "")
    out.provider = provider
    block = dns01.get(provider) if provider else None
    if not isinstance(block, dict):
        return out
    if provider == "lexicon":
        out.values["lexicon-provider"] = str(block.get("provider") or "")
        out.values["lexicon-options"] = "\n".join(
            f"{k}={v}" for k, v in block.items() if k not in _LEXICON_OWN
        )
        if block.get("credentialsSecretRef"):
            out.secrets_set.add("lexicon-credentialValue")
        return out
    for item in PROVIDERS[provider]:
        if item.secret:
            if block.get(item.ref):
                out.secrets_set.add(f"{provider}-{item.key}")
        elif block.get(item.key) is not None:
            out.values[f"{provider}-{item.key}"] = str(block[item.key])
    return out


def values_from_spec(kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The form's initial values for a stored issuer spec (never a secret's value)."""
    block = spec.get(kind)
    block = block if isinstance(block, dict) else {}
    values: dict[str, Any] = {"kind": kind}
    if kind == "acme":
        server = str(block.get("server") or "")
        eab = block.get("externalAccountBinding") or {}
        values.update(
            preset=preset_of(server),
            server=server,
            email=str(block.get("email") or ""),
            profile=str(block.get("profile") or ""),
            ca_bundle=str(block.get("caBundle") or ""),
            eab_key_id=str(eab.get("keyID") or ""),
            eab_algorithm=str(eab.get("keyAlgorithm") or "HS256"),
            eab_hmac_set=bool(eab.get("keySecretRef") or eab.get("hmacKey")),
        )
        solvers = block.get("solvers") or []
        values["solvers"] = [_solver_values(i, s) for i, s in enumerate(solvers)]
    elif kind == "ca":
        values.update(
            ca_mode="keep",
            ca_secret_name=str(block.get("secretName") or ""),
            max_duration=_described(block.get("maxDuration")),
        )
    elif kind == "selfSigned":
        values["max_duration"] = _described(block.get("maxDuration"))
    return values


def values_from_post(data: QueryDict | Mapping[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The form's values after a POST that did not save: what was typed, never a secret
    (secrets that were stored before still show as set)."""
    values = dict(stored)
    for key in (
        "name",
        "kind",
        "preset",
        "server",
        "email",
        "profile",
        "ca_bundle",
        "eab_key_id",
        "eab_algorithm",
        "ca_mode",
        "ca_common_name",
        "ca_certificate",
        "max_duration",
    ):
        values[key] = str(data.get(key) or "")
    values["cluster"] = bool(data.get("cluster"))
    values["accept_tos"] = bool(data.get("accept_tos"))
    preset = PRESETS_BY_KEY.get(values["preset"])
    if preset:
        values["server"] = preset.url
    old_solvers = {s.index: s for s in stored.get("solvers") or []}
    solvers = []
    for i in range(slot_count(data)):
        prefix = f"solver-{i}-"
        slot = SolverValues(
            i,
            type=_get(data, prefix + "type"),
            provider=_get(data, prefix + "provider"),
            dns_zones=str(data.get(prefix + "dns_zones") or ""),
            dns_names=str(data.get(prefix + "dns_names") or ""),
            match_labels=str(data.get(prefix + "match_labels") or ""),
            follow_cname=bool(data.get(prefix + "follow_cname")),
        )
        for provider, fields in PROVIDERS.items():
            for item in fields:
                if not item.secret:
                    key = f"{provider}-{item.key}"
                    slot.values[key] = str(data.get(prefix + key) or "")
        old = old_solvers.get(i)
        if old is not None and old.provider == slot.provider:
            slot.secrets_set = set(old.secrets_set)
        solvers.append(slot)
    values["solvers"] = solvers
    values["posted"] = True
    return values


# -- what the template renders ----------------------------------------------------------


@dataclass(frozen=True)
class RenderedField:
    name: str
    label: str
    value: str
    secret: bool
    is_set: bool
    choices: tuple[str, ...]
    help: str
    errors: list[str]
    multiline: bool


def solver_slots(values: Mapping[str, Any], errors: Mapping[str, list[str]]) -> list[Any]:
    """Every solver slot with its provider groups and their fields, ready to render; one
    empty slot more than configured, so another solver can be added."""
    slots: list[SolverValues] = list(values.get("solvers") or [])
    wanted = max(MIN_SOLVER_SLOTS, len(slots) + (0 if values.get("posted") else 1))
    while len(slots) < min(wanted, MAX_SOLVER_SLOTS):
        slots.append(SolverValues(len(slots)))
    out = []
    for slot in slots:
        prefix = f"solver-{slot.index}-"
        groups = []
        for provider, defs in PROVIDERS.items():
            fields = []
            for item in defs:
                key = f"{provider}-{item.key}"
                fields.append(
                    RenderedField(
                        name=prefix + key,
                        label=item.label,
                        value="" if item.secret else slot.values.get(key, ""),
                        secret=item.secret,
                        is_set=key in slot.secrets_set,
                        choices=item.choices,
                        help=item.help,
                        errors=list(errors.get(prefix + key, [])),
                        multiline=item.key == "options",
                    )
                )
            groups.append(
                {"provider": provider, "label": PROVIDER_LABELS[provider], "fields": fields}
            )
        out.append(
            {
                "slot": slot,
                "prefix": prefix,
                "groups": groups,
                "errors": {
                    name: list(errors.get(prefix + name, []))
                    for name in ("type", "provider", "dns_zones", "dns_names", "match_labels")
                },
            }
        )
    return out


# -- SpecError paths -> form fields -----------------------------------------------------

_SOLVER_PATH = re.compile(r"^spec\.acme\.solvers\[(\d+)\](.*)$")
_ACME_FIELDS = {
    "server": "server",
    "email": "email",
    "profile": "profile",
    "caBundle": "ca_bundle",
    "externalAccountBinding.keyID": "eab_key_id",
    "externalAccountBinding.keyAlgorithm": "eab_algorithm",
    "externalAccountBinding.hmacKey": "eab_hmac_key",
    "externalAccountBinding.keySecretRef": "eab_hmac_key",
    "externalAccountBinding": "eab_hmac_key",
    "solvers": "solvers",
}
_CA_FIELDS = {
    "commonName": "ca_common_name",
    "certificate": "ca_certificate",
    "privateKey": "ca_private_key",
    "maxDuration": "max_duration",
    "secretName": "ca_mode",
    "generate": "ca_mode",
}


def _solver_field(index: int, rest: str) -> str:
    prefix = f"solver-{index}-"
    if rest.startswith(".selector.dnsZones"):
        return prefix + "dns_zones"
    if rest.startswith(".selector.dnsNames"):
        return prefix + "dns_names"
    if rest.startswith(".selector.matchLabels"):
        return prefix + "match_labels"
    match = re.match(r"^\.dns01\.(\w+)(?:\.(\w+))?", rest)
    if match and match.group(1) in PROVIDERS:
        provider, key = match.group(1), match.group(2) or ""
        if provider == "lexicon" and key in ("credentials", "credentialsSecretRef"):
            return prefix + "lexicon-credentialValue"
        if provider == "lexicon" and key and key != "provider":
            return prefix + "lexicon-options"
        for item in PROVIDERS[provider]:
            if key in (item.key, item.ref):
                return f"{prefix}{provider}-{item.key}"
        return prefix + "provider"
    if rest.startswith(".dns01"):
        return prefix + "provider"
    return prefix + "type"


def field_for_path(path: str) -> str:
    """The form field a SpecError path is about ("" for the form as a whole)."""
    if path == "name":
        return "name"
    match = _SOLVER_PATH.match(path)
    if match:
        return _solver_field(int(match.group(1)), match.group(2))
    for prefix, table in (("spec.acme.", _ACME_FIELDS), ("spec.ca.", _CA_FIELDS)):
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            # The longest known field the path is in.
            for key in sorted(table, key=len, reverse=True):
                if rest == key or rest.startswith(key + ".") or rest.startswith(key + "["):
                    return table[key]
    if path in ("spec.acme", "spec.ca"):
        return "server" if path == "spec.acme" else "ca_mode"
    if path.startswith("spec.selfSigned.maxDuration"):
        return "max_duration"
    return ""


def errors_by_field(errors: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path, message in errors:
        field = field_for_path(path)
        if field == "max_duration":  # typed in words: answered in words, without the path
            out.setdefault(field, []).append(_max_duration_in_words(message))
        else:
            out.setdefault(field, []).append(f"{path}: {message}")
    return out


def _max_duration_in_words(message: str) -> str:
    bad = _BAD_GO_DURATION.match(message)
    if bad:  # the spec's Go-only wording: say which forms the field takes
        return f"{bad.group(1)} is not a length of time: write it like {FRIENDLY_EXAMPLES}"
    return _GO_DURATION.sub(lambda m: describe_go_duration(m.group(0)), message)


_GO_DURATION = re.compile(r"\b\d+h\d+m\d+s\b")
_BAD_GO_DURATION = re.compile(r"invalid duration ('[^']*'|\"[^\"]*\")")
