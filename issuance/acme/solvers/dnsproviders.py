"""DNS-01 providers served by dns-lexicon: our `lexicon` block and cert-manager's own blocks.

A solver's `dns01` holds one provider block. Besides `rfc2136` and `webhook` (own solvers):

    lexicon: {provider: powerdns, credentialsSecretRef: {name: pdns-api},
              pdns_server: http://127.0.0.1:8081, ttl: 60}

`provider` is a lexicon provider module name; every other key is one of that provider's
non-secret options (lexicon's names, e.g. pdns_server, zone_id, resource_group) or `ttl`
/ `zone`; the credentials (auth_token, auth_username, …) are the keys of the referenced
Secret, stored encrypted. cert-manager's blocks are kept in the spec as written (so a
manifest round-trips) and mapped here, at use, onto a lexicon provider:

    cloudflare    → cloudflare      (apiTokenSecretRef → auth_token; or email +
                                     apiKeySecretRef → auth_username + auth_token)
    route53       → route53         (accessKeyID[SecretRef] → auth_access_key,
                                     secretAccessKeySecretRef → auth_access_secret,
                                     hostedZoneID → zone_id, region → the boto3
                                     client's region; no keys: boto3's own chain)
    digitalocean  → digitalocean    (tokenSecretRef → auth_token)
    azureDNS      → azure           (clientID, clientSecretSecretRef, tenantID,
                                     subscriptionID, resourceGroupName, hostedZoneName)
    cloudDNS      → googleclouddns  (serviceAccountSecretRef → auth_service_account_info,
                                     hostedZoneName)

`acmeDNS` and `akamai` have no lexicon provider and are refused by the spec (naming the
field). This module is plain data: no models, no network.
"""

from __future__ import annotations

import argparse
import base64
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# lexicon (through tldextract) would download the public suffix list on first use; this
# console may have no internet, and a fetch that hangs stalls a worker for tens of
# seconds. Use tldextract's bundled snapshot everywhere (the solver never needs the list:
# it finds the zone itself by an SOA walk and passes it to the provider).
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

LEXICON = "lexicon"
# cert-manager block → lexicon provider module.
CERT_MANAGER_PROVIDERS = {
    "cloudflare": "cloudflare",
    "route53": "route53",
    "digitalocean": "digitalocean",
    "azureDNS": "azure",
    "cloudDNS": "googleclouddns",
}
# cert-manager blocks lexicon cannot serve, and what to use instead.
REFUSED = {
    "acmeDNS": "dns-lexicon has no acme-dns provider; point _acme-challenge at a zone a "
    "supported provider manages (a CNAME, followed with cnameStrategy: Follow) or use webhook",
    "akamai": "dns-lexicon has no Akamai Edge DNS provider; use rfc2136 (Edge DNS accepts "
    "TSIG-signed updates) or webhook",
}
# Options of the lexicon block that are ours, not the provider's.
OWN_OPTIONS = ("provider", "credentialsSecretRef", "credentials", "ttl", "zone")
DEFAULT_TTL = 60


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str | None = None  # None: every key of the Secret is an option


@dataclass(frozen=True)
class LexiconPlan:
    """What a provider block means for lexicon: the provider, its plain options, where the
    secret options come from, and our own settings."""

    provider: str
    options: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, SecretRef] = field(default_factory=dict)  # option → one Secret key
    credentials: SecretRef | None = None  # a Secret whose keys are all options
    ttl: int = DEFAULT_TTL
    zone: str = ""  # the zone to write to, when set (else found by an SOA walk)
    # option → how a secret value is turned into what lexicon wants
    transforms: dict[str, str] = field(default_factory=dict)
    # route53: the AWS region of the client (lexicon's provider takes none; the solver
    # gives it to boto3, which picks the partition's endpoint and signing region from it).
    region: str = ""
    role: str = ""  # route53: an IAM role ARN assumed through STS before calling Route 53


def _ref(value: Any) -> SecretRef | None:
    if isinstance(value, dict) and value.get("name"):
        key = value.get("key")
        return SecretRef(str(value["name"]), str(key) if key else None)
    return None


def _cloudflare(block: dict[str, Any]) -> LexiconPlan:
    token = _ref(block.get("apiTokenSecretRef"))
    if token is not None:
        return LexiconPlan("cloudflare", secrets={"auth_token": token})
    key = _ref(block.get("apiKeySecretRef"))
    secrets = {"auth_token": key} if key else {}
    options = {"auth_username": str(block["email"])} if block.get("email") else {}
    return LexiconPlan("cloudflare", options=options, secrets=secrets)


def _route53(block: dict[str, Any]) -> LexiconPlan:
    options: dict[str, str] = {}
    secrets: dict[str, SecretRef] = {}
    if block.get("accessKeyID"):
        options["auth_access_key"] = str(block["accessKeyID"])
    key_ref = _ref(block.get("accessKeyIDSecretRef"))
    if key_ref:
        secrets["auth_access_key"] = key_ref
    secret_ref = _ref(block.get("secretAccessKeySecretRef"))
    if secret_ref:
        secrets["auth_access_secret"] = secret_ref
    if block.get("hostedZoneID"):
        options["zone_id"] = str(block["hostedZoneID"])
    region = str(block.get("region") or "")
    role = str(block.get("role") or "")
    return LexiconPlan("route53", options=options, secrets=secrets, region=region, role=role)


def _digitalocean(block: dict[str, Any]) -> LexiconPlan:
    token = _ref(block.get("tokenSecretRef"))
    return LexiconPlan("digitalocean", secrets={"auth_token": token} if token else {})


def _azure(block: dict[str, Any]) -> LexiconPlan:
    names = {
        "clientID": "auth_client_id",
        "tenantID": "auth_tenant_id",
        "subscriptionID": "auth_subscription_id",
        "resourceGroupName": "resource_group",
    }
    options = {ours: str(block[theirs]) for theirs, ours in names.items() if block.get(theirs)}
    secret = _ref(block.get("clientSecretSecretRef"))
    return LexiconPlan(
        "azure",
        options=options,
        secrets={"auth_client_secret": secret} if secret else {},
        zone=str(block.get("hostedZoneName") or ""),
    )


def _cloud_dns(block: dict[str, Any]) -> LexiconPlan:
    account = _ref(block.get("serviceAccountSecretRef"))
    return LexiconPlan(
        "googleclouddns",
        secrets={"auth_service_account_info": account} if account else {},
        zone=str(block.get("hostedZoneName") or ""),
        transforms={"auth_service_account_info": "base64::"},
    )


MAPPERS: dict[str, Callable[[dict[str, Any]], LexiconPlan]] = {
    "cloudflare": _cloudflare,
    "route53": _route53,
    "digitalocean": _digitalocean,
    "azureDNS": _azure,
    "cloudDNS": _cloud_dns,
}


def _lexicon(block: dict[str, Any]) -> LexiconPlan:
    options = {str(k): str(v) for k, v in block.items() if k not in OWN_OPTIONS and v is not None}
    ttl = block.get("ttl")
    return LexiconPlan(
        str(block.get("provider") or ""),
        options=options,
        credentials=_ref(block.get("credentialsSecretRef")),
        ttl=int(ttl) if isinstance(ttl, int) and ttl > 0 else DEFAULT_TTL,
        zone=str(block.get("zone") or "").rstrip("."),
    )


def lexicon_block_of(dns01: Mapping[str, Any]) -> str | None:
    """The key of the block lexicon serves (`lexicon` or a cert-manager name), if any."""
    for key in (LEXICON, *MAPPERS):
        if isinstance(dns01.get(key), dict):
            return key
    return None


def plan_for(dns01: Mapping[str, Any]) -> LexiconPlan | None:
    """The lexicon plan of a (validated) dns01 block, or None if lexicon does not serve it."""
    key = lexicon_block_of(dns01)
    if key is None:
        return None
    block = dict(dns01[key])
    if key == LEXICON:
        return _lexicon(block)
    return MAPPERS[key](block)


def transform(option: str, value: str, plan: LexiconPlan) -> str:
    """A secret value as lexicon wants it (a service account JSON → base64::…)."""
    prefix = plan.transforms.get(option)
    if prefix == "base64::" and not value.startswith(("base64::", "file::")):
        return "base64::" + base64.b64encode(value.encode()).decode()
    return value


# -- what lexicon offers ---------------------------------------------------------------


@cache
def providers() -> dict[str, bool]:
    """Every lexicon provider module, and whether its extra dependencies are installed."""
    from lexicon._private.discovery import find_providers

    return {name: bool(ok) for name, ok in find_providers().items() if name != "auto"}


@cache
def provider_options(provider: str) -> frozenset[str]:
    """The option names (argparse dests) a lexicon provider declares."""
    from lexicon._private.discovery import load_provider_module

    parser = argparse.ArgumentParser(add_help=False)
    load_provider_module(provider).Provider.configure_parser(parser)
    return frozenset(action.dest for action in parser._actions)


# Credentials that do not follow lexicon's auth_* convention (ionos, qcloud).
SECRET_OPTIONS = frozenset({"api_key", "secret_id", "secret_key"})
# auth_* options that are identifiers, not secrets (cloudflare's e-mail, azure's app id).
PLAIN_AUTH_OPTIONS = frozenset({"auth_username", "auth_client_id"})


def is_secret_option(option: str) -> bool:
    """Options that are credentials (they belong in the Secret, never in the spec)."""
    if option in PLAIN_AUTH_OPTIONS:
        return False
    return option.startswith("auth_") or option in SECRET_OPTIONS


def provider_problem(provider: str) -> str | None:
    """Why `provider` cannot be used here, or None."""
    known = providers()
    if provider not in known:
        return f"dns-lexicon has no provider {provider!r}"
    if not known[provider]:
        return (
            f"lexicon's {provider} provider needs extra Python packages that are not "
            f"installed here (dns-lexicon[{provider}])"
        )
    return None
