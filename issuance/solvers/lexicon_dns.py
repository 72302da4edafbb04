"""DNS-01 through dns-lexicon (about 90 DNS hosting APIs): the `lexicon` block and the
cert-manager blocks mapped onto it (issuance/solvers/dnsproviders.py).

present adds our TXT value at `_acme-challenge.<name>` (or, with cnameStrategy: Follow, at
the end of its CNAME chain) next to any others; cleanup deletes exactly that value. Both
are idempotent at the provider (lexicon's create skips an existing record, delete of a
missing one does nothing). The zone is found by an SOA walk through the self-check
resolver, not by lexicon's public-suffix guess (which would need the internet and is wrong
for delegated subzones), unless the block names it (`zone`, `hostedZoneName`).

Lexicon's providers call HTTP APIs with requests and no timeout: every call here runs
under `http_timeout`, which gives requests made by this thread a default timeout (an
adapter hook, thread-local, installed once). Providers built on SDKs (boto3, Google, Azure)
use those SDKs' own timeouts. Errors become TemporaryError (the worker backs off); the
text names the provider and the HTTP status, never a credential.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.resolver
import requests
import requests.adapters

from issuance.controllers.base import TemporaryError
from issuance.models import Challenge
from issuance.solvers import dnsproviders
from issuance.solvers.base import SolverConfigError, txt_record_name, txt_value
from issuance.solvers.dnsproviders import LexiconPlan
from issuance.solvers.selfcheck import check_dns01, describe_dns_error, resolver

# Connect and read timeout for each HTTP call a provider makes (seconds).
HTTP_TIMEOUT = (10.0, 30.0)
MAX_CNAME_HOPS = 8

_local = threading.local()
_hook_lock = threading.Lock()


def _install_timeout_hook() -> None:
    """Wrap HTTPAdapter.send once: a call without a timeout made inside `http_timeout` gets
    HTTP_TIMEOUT. Other threads and calls outside the context are untouched."""
    with _hook_lock:
        adapter: Any = requests.adapters.HTTPAdapter
        if getattr(adapter.send, "issuance_timeout_hook", False):
            return
        original = adapter.send

        def send(self: requests.adapters.HTTPAdapter, request: Any, **kwargs: Any) -> Any:
            default = getattr(_local, "timeout", None)
            if default is not None and kwargs.get("timeout") is None:
                kwargs["timeout"] = default
            return original(self, request, **kwargs)

        send.issuance_timeout_hook = True  # type: ignore[attr-defined]
        adapter.send = send


@contextlib.contextmanager
def http_timeout(timeout: tuple[float, float] = HTTP_TIMEOUT) -> Iterator[None]:
    _install_timeout_hook()
    previous = getattr(_local, "timeout", None)
    _local.timeout = timeout
    try:
        yield
    finally:
        _local.timeout = previous


def _offline_tldextract() -> None:
    """Some providers call tldextract.extract() themselves: make its module-wide extractor
    use the bundled suffix list snapshot, never the network."""
    import tldextract.tldextract as tld

    if tld.TLD_EXTRACTOR.suffix_list_urls:
        tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None)


class CredentialsError(TemporaryError):
    """The referenced Secret or key is missing (it can be created later: worth retrying)."""


def read_secret_data(name: str) -> dict[str, str]:
    """Every key of an Opaque Secret, decrypted."""
    from issuance.models import Secret

    secret = Secret.objects.filter(name=name).first()
    if secret is None:
        raise CredentialsError(f"secret {name!r} not found")
    data = json.loads(secret.tls_key or "{}") if secret.type == "Opaque" else {}
    return {str(k): str(v) for k, v in data.items()}


def resolve_options(plan: LexiconPlan) -> dict[str, str]:
    """The provider's options: the plain ones, then the credentials from the Secrets."""
    from issuance.specs.secrets import SecretRefError, read_secret_value

    options = dict(plan.options)
    if plan.credentials is not None:
        options.update(read_secret_data(plan.credentials.name))
    for option, ref in plan.secrets.items():
        try:
            value = read_secret_value(ref.name, ref.key)
        except SecretRefError as exc:
            raise CredentialsError(f"{plan.provider} {option}: {exc}") from exc
        options[option] = dnsproviders.transform(option, value, plan)
    return options


def follow_cname(fqdn: str, res: dns.resolver.Resolver | None = None) -> list[str]:
    """The CNAME chain from `fqdn` (itself first, the name that holds records last)."""
    res = res or resolver()
    chain = [fqdn if fqdn.endswith(".") else fqdn + "."]
    for _ in range(MAX_CNAME_HOPS):
        try:
            answer = res.resolve(chain[-1], "CNAME", raise_on_no_answer=False)
        except dns.resolver.NXDOMAIN:
            break
        target = next((r.target.to_text() for r in answer), None) if answer.rrset else None
        if target is None or target in chain:
            break
        chain.append(target)
    return chain


def find_zone(fqdn: str, res: dns.resolver.Resolver | None = None) -> str:
    """The zone that holds `fqdn` (SOA walk through the self-check resolver), no final dot."""
    try:
        zone = dns.resolver.zone_for_name(fqdn, resolver=res or resolver())
    except (OSError, dns.exception.DNSException) as exc:
        raise TemporaryError(
            f"finding the zone of {fqdn}: {describe_dns_error(exc, 'the SOA walk')}"
        ) from exc
    return zone.to_text(omit_final_dot=True)


def describe_provider_error(provider: str, exc: BaseException) -> str:
    """An error from a provider call, in words, without request details (no credentials)."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        reason = exc.response.reason or ""
        status = exc.response.status_code
        hint = " (bad credentials?)" if status in (401, 403) else ""
        return f"{provider} API answered HTTP {status} {reason}{hint}".rstrip()
    if isinstance(exc, requests.Timeout):
        return f"{provider} API did not answer within {HTTP_TIMEOUT[1]:g}s"
    if isinstance(exc, requests.ConnectionError):
        return f"{provider} API is unreachable: {type(exc).__name__}"
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{provider}: {type(exc).__name__}" + (f": {text}" if text else "")


@dataclass
class Target:
    fqdn: str  # where the TXT record goes (after following CNAMEs, when asked to)
    zone: str


class LexiconSolver:
    name = "lexicon"
    cleanup_in_database = False

    def __init__(self, dns01: Mapping[str, Any]) -> None:
        plan = dnsproviders.plan_for(dns01)
        if plan is None or not plan.provider:
            raise SolverConfigError("dns01 lexicon solver without a provider")
        problem = dnsproviders.provider_problem(plan.provider)
        if problem:
            raise SolverConfigError(problem)
        self.plan = plan
        self.follow = str(dns01.get("cnameStrategy") or "") == "Follow"

    def record_fqdn(self, dns_name: str) -> str:
        fqdn = txt_record_name(dns_name)
        if self.follow:
            try:
                fqdn = follow_cname(fqdn)[-1]
            except (OSError, dns.exception.DNSException) as exc:
                raise TemporaryError(
                    f"following the CNAME at {fqdn}: {describe_dns_error(exc, 'the resolver')}"
                ) from exc
        return fqdn

    def target(self, dns_name: str) -> Target:
        fqdn = self.record_fqdn(dns_name)
        return Target(fqdn=fqdn, zone=self.plan.zone or find_zone(fqdn))

    def provider(self, zone: str) -> Any:
        """A lexicon provider for `zone`, authenticated (one read call at the provider)."""
        from lexicon._private.discovery import load_provider_module
        from lexicon.config import ConfigResolver

        _offline_tldextract()
        name = self.plan.provider
        config = ConfigResolver().with_dict(  # type: ignore[no-untyped-call]
            {
                "provider_name": name,
                "domain": zone,
                "ttl": self.plan.ttl,
                name: resolve_options(self.plan),
            }
        )
        try:
            with http_timeout():
                instance = load_provider_module(name).Provider(config)
                instance.authenticate()
        except Exception as exc:  # any provider failure (lexicon has no common base)
            raise TemporaryError(f"{describe_provider_error(name, exc)} (zone {zone})") from None
        return instance

    def _call(self, action: str, fqdn: str, zone: str, method: str, *args: Any) -> Any:
        provider = self.provider(zone)
        try:
            with http_timeout():
                return getattr(provider, method)(*args)
        except Exception as exc:  # any provider failure
            raise TemporaryError(
                f"{action} TXT {fqdn} in zone {zone}: "
                f"{describe_provider_error(self.plan.provider, exc)}"
            ) from None

    def list_txt(self, fqdn: str, zone: str) -> list[str]:
        records = self._call("listing", fqdn, zone, "list_records", "TXT", fqdn.rstrip("."))
        return [str(r.get("content") or "") for r in records]

    def present(self, challenge: Challenge) -> None:
        target = self.target(challenge.dns_name)
        value = txt_value(challenge)
        name = target.fqdn.rstrip(".")
        self._call("adding", target.fqdn, target.zone, "create_record", "TXT", name, value)

    def cleanup(self, challenge: Challenge) -> None:
        target = self.target(challenge.dns_name)
        value = txt_value(challenge)
        name = target.fqdn.rstrip(".")
        self._call("deleting", target.fqdn, target.zone, "delete_record", None, "TXT", name, value)

    def self_check(self, challenge: Challenge) -> str | None:
        try:
            fqdn = self.record_fqdn(challenge.dns_name)
        except TemporaryError as exc:
            return str(exc)
        return check_dns01(fqdn, txt_value(challenge))


def solver_for_dns01(dns01: Mapping[str, Any]) -> LexiconSolver | None:
    """A LexiconSolver when lexicon serves this dns01 block, else None."""
    if dnsproviders.lexicon_block_of(dns01) is None:
        return None
    return LexiconSolver(dns01)
