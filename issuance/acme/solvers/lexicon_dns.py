"""DNS-01 through dns-lexicon (about 90 DNS hosting APIs): the `lexicon` block and the
cert-manager blocks mapped onto it (issuance/acme/solvers/dnsproviders.py).

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.resolver
import requests
import requests.adapters

from issuance.acme.solvers import dnsproviders
from issuance.acme.solvers.base import SolverConfigError, txt_record_name, txt_value
from issuance.acme.solvers.dnsproviders import LexiconPlan
from issuance.acme.solvers.selfcheck import check_dns01, describe_dns_error, resolver
from issuance.controllers.base import TemporaryError
from issuance.models import Challenge

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


# boto3's default session (lexicon's route53 provider builds its client from it) is not
# safe to use from several threads at once: worker threads build providers one at a time.
_aws_lock = threading.Lock()


ROLE_SESSION_NAME = "issuance-console"


def route53_client(options: Mapping[str, str], region: str, role: str = "") -> Any:
    """The Route 53 client lexicon's provider would make, plus the block's region.

    A new boto3 session each time: the default one caches the credentials it found on
    first use, so a rotated ambient key would never be read again. Without an access key
    in `options`, boto3's own chain applies (AWS_ACCESS_KEY_ID…, ~/.aws, instance role);
    the endpoint honours AWS_ENDPOINT_URL_ROUTE_53 / AWS_ENDPOINT_URL like every boto3
    client, and without a region boto3 uses AWS_REGION / AWS_DEFAULT_REGION or the global
    endpoint.
    """
    import boto3  # type: ignore[import-untyped]

    session = boto3.session.Session()
    credentials = {
        "aws_access_key_id": options.get("auth_access_key") or options.get("auth_username"),
        "aws_secret_access_key": options.get("auth_access_secret") or options.get("auth_token"),
    }
    if role:
        # cert-manager's route53.role: those credentials only assume the role (STS, at
        # AWS_ENDPOINT_URL_STS when set); Route 53 is called with the role's.
        sts = session.client("sts", region_name=region or None, **credentials)
        assumed = sts.assume_role(RoleArn=role, RoleSessionName=ROLE_SESSION_NAME)["Credentials"]
        credentials = {
            "aws_access_key_id": assumed["AccessKeyId"],
            "aws_secret_access_key": assumed["SecretAccessKey"],
            "aws_session_token": assumed["SessionToken"],
        }
    return session.client("route53", region_name=region or None, **credentials)


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
    from issuance.specs.secret_refs import SecretRefError, read_secret_value

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


class ProviderRefused(Exception):
    """A provider call returned failure without raising (its own log line says why)."""


def describe_provider_error(provider: str, exc: BaseException) -> str:
    """An error from a provider call, in words, without request details (no credentials)."""
    if isinstance(exc, ProviderRefused):
        return f"{exc} (the worker log has the provider's reason)"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        reason = exc.response.reason or ""
        status = exc.response.status_code
        hint = " (bad credentials?)" if status in (401, 403) else ""
        return f"{provider} API answered HTTP {status} {reason}{hint}".rstrip()
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and isinstance(response.get("Error"), dict):  # botocore
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
        code = str(response["Error"].get("Code") or "")
        hint = " (bad credentials?)" if status in (401, 403) else ""
        return f"{provider} API answered HTTP {status} {code}{hint}".rstrip()
    if isinstance(exc, requests.Timeout):
        return f"{provider} API did not answer within {HTTP_TIMEOUT[1]:g}s"
    if isinstance(exc, requests.ConnectionError):
        return f"{provider} API is unreachable: {type(exc).__name__}"
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{provider}: {type(exc).__name__}" + (f": {text}" if text else "")


def _txt_values(provider: Any, name: str) -> list[str]:
    return [str(r.get("content") or "") for r in provider.list_records("TXT", name)]


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

    def build_provider(self, zone: str) -> Any:
        """A lexicon provider for `zone` with its options and credentials, not yet
        authenticated (no network call)."""
        from lexicon._private.discovery import load_provider_module
        from lexicon.config import ConfigResolver

        _offline_tldextract()
        name = self.plan.provider
        options = resolve_options(self.plan)
        config = ConfigResolver().with_dict(  # type: ignore[no-untyped-call]
            {"provider_name": name, "domain": zone, "ttl": self.plan.ttl, name: options}
        )
        if name != "route53":
            return load_provider_module(name).Provider(config)
        with _aws_lock:
            instance = load_provider_module(name).Provider(config)
            instance.r53_client = route53_client(options, self.plan.region, self.plan.role)
        return instance

    def provider(self, zone: str) -> Any:
        """A lexicon provider for `zone`, authenticated (one read call at the provider)."""
        try:
            with http_timeout():
                instance = self.build_provider(zone)
                instance.authenticate()
        except CredentialsError:
            raise
        except Exception as exc:  # any provider failure (lexicon has no common base)
            raise TemporaryError(
                f"{describe_provider_error(self.plan.provider, exc)} (zone {zone})"
            ) from None
        return instance

    def _call(self, action: str, fqdn: str, zone: str, work: Callable[[Any], Any]) -> Any:
        """`work(provider)` with an authenticated provider for `zone`; its failures become
        TemporaryError naming the provider, never a credential."""
        provider = self.provider(zone)
        try:
            with http_timeout():
                return work(provider)
        except Exception as exc:  # any provider failure
            raise TemporaryError(
                f"{action} TXT {fqdn} in zone {zone}: "
                f"{describe_provider_error(self.plan.provider, exc)}"
            ) from None

    def list_txt(self, fqdn: str, zone: str) -> list[str]:
        found: list[str] = self._call(
            "listing", fqdn, zone, lambda p: _txt_values(p, fqdn.rstrip("."))
        )
        return found

    def present(self, challenge: Challenge) -> None:
        target = self.target(challenge.dns_name)
        value = txt_value(challenge)
        name = target.fqdn.rstrip(".")

        def add(provider: Any) -> None:
            # Some providers (route53) log an API refusal and return False instead of raising.
            if provider.create_record("TXT", name, value) is False:
                raise ProviderRefused(f"{self.plan.provider} did not add the record")

        self._call("adding", target.fqdn, target.zone, add)

    def cleanup(self, challenge: Challenge) -> None:
        target = self.target(challenge.dns_name)
        value = txt_value(challenge)
        name = target.fqdn.rstrip(".")

        def remove(provider: Any) -> None:
            try:
                removed = provider.delete_record(None, "TXT", name, value)
            except Exception:
                # Some providers (route53) raise when the value is not there: already
                # removed (a cleanup retried after its change went through) is done.
                if value not in _txt_values(provider, name):
                    return
                raise
            if removed is False:
                raise ProviderRefused(f"{self.plan.provider} did not delete the record")

        self._call("deleting", target.fqdn, target.zone, remove)

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
