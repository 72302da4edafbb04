"""dns01 provider blocks served by dns-lexicon: cert-manager's blocks as written in
manifests, our `lexicon` block, their mapping onto lexicon providers, and the spec errors
(each naming its field)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

from issuance.acme.solvers import dnsproviders
from issuance.acme.solvers.dnsproviders import LexiconPlan, SecretRef, plan_for
from issuance.acme.solvers.registry import solver_for
from issuance.specs import SpecError, validate_issuer_spec

MANIFEST = """
acme:
  server: https://acme-v02.api.letsencrypt.org/directory
  email: ops@example.com
  privateKeySecretRef: {name: le-account}
  solvers:
    - selector: {dnsZones: [example.com]}
      dns01:
        cloudflare:
          apiTokenSecretRef: {name: cloudflare-api-token-secret, key: api-token}
    - selector: {dnsZones: [example.net]}
      dns01:
        cloudflare:
          email: my-cloudflare-acc@example.com
          apiKeySecretRef: {name: cloudflare-api-key-secret, key: api-key}
    - selector: {dnsZones: [example.org]}
      dns01:
        digitalocean:
          tokenSecretRef: {name: digitalocean-dns, key: access-token}
    - selector: {dnsZones: [example.io]}
      dns01:
        azureDNS:
          clientID: AZURE_CERT_MANAGER_SP_APP_ID
          clientSecretSecretRef: {name: azuredns-config, key: client-secret}
          subscriptionID: AZURE_SUBSCRIPTION_ID
          tenantID: AZURE_TENANT_ID
          resourceGroupName: AZURE_DNS_ZONE_RESOURCE_GROUP
          hostedZoneName: example.io
          environment: AzurePublicCloud
    - selector: {dnsZones: [example.dev]}
      dns01:
        cloudDNS:
          project: my-project
          serviceAccountSecretRef: {name: clouddns-dns01-solver-svc-acct, key: key.json}
    - dns01:
        cnameStrategy: Follow
        lexicon:
          provider: powerdns
          pdns_server: http://pdns.example.com:8081
          credentialsSecretRef: {name: pdns-api}
          ttl: 120
"""


def validate(spec: dict[str, Any]) -> Any:
    return validate_issuer_spec("iss", spec, lookups=False)


def problems(spec: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as info:
        validate(spec)
    return info.value.as_dict()


def solvers_spec(*dns01: dict[str, Any]) -> dict[str, Any]:
    return {"acme": {"server": "https://a.test/dir", "solvers": [{"dns01": d} for d in dns01]}}


def test_cert_manager_manifest_is_accepted_as_written() -> None:
    spec = yaml.safe_load(MANIFEST)
    result = validate(spec)
    solvers = result.spec["acme"]["solvers"]
    # Kept as written (a manifest round-trips), nothing secret in it.
    for given, kept in zip(spec["acme"]["solvers"], solvers, strict=True):
        assert kept["dns01"] == given["dns01"]
    assert result.secrets == []


def test_cert_manager_blocks_map_onto_lexicon_providers() -> None:
    solvers = [s["dns01"] for s in yaml.safe_load(MANIFEST)["acme"]["solvers"]]
    assert plan_for(solvers[0]) == LexiconPlan(
        "cloudflare",
        secrets={"auth_token": SecretRef("cloudflare-api-token-secret", "api-token")},
    )
    assert plan_for(solvers[1]) == LexiconPlan(
        "cloudflare",
        options={"auth_username": "my-cloudflare-acc@example.com"},
        secrets={"auth_token": SecretRef("cloudflare-api-key-secret", "api-key")},
    )
    assert plan_for(solvers[2]) == LexiconPlan(
        "digitalocean", secrets={"auth_token": SecretRef("digitalocean-dns", "access-token")}
    )
    azure = plan_for(solvers[3])
    assert azure is not None and azure.provider == "azure" and azure.zone == "example.io"
    assert azure.options == {
        "auth_client_id": "AZURE_CERT_MANAGER_SP_APP_ID",
        "auth_tenant_id": "AZURE_TENANT_ID",
        "auth_subscription_id": "AZURE_SUBSCRIPTION_ID",
        "resource_group": "AZURE_DNS_ZONE_RESOURCE_GROUP",
    }
    assert azure.secrets == {"auth_client_secret": SecretRef("azuredns-config", "client-secret")}
    cloud = plan_for(solvers[4])
    assert cloud is not None and cloud.provider == "googleclouddns"
    account = json.dumps({"type": "service_account", "project_id": "my-project"})
    wanted = "base64::" + base64.b64encode(account.encode()).decode()
    assert dnsproviders.transform("auth_service_account_info", account, cloud) == wanted
    assert plan_for(solvers[5]) == LexiconPlan(
        "powerdns",
        options={"pdns_server": "http://pdns.example.com:8081"},
        credentials=SecretRef("pdns-api"),
        ttl=120,
    )


def test_route53_maps_access_keys_and_zone() -> None:
    plan = plan_for(
        {
            "route53": {
                "region": "eu-west-1",
                "accessKeyID": "AKIAEXAMPLE",
                "secretAccessKeySecretRef": {"name": "aws", "key": "secret"},
                "hostedZoneID": "Z123",
            }
        }
    )
    assert plan == LexiconPlan(
        "route53",
        options={"auth_access_key": "AKIAEXAMPLE", "zone_id": "Z123"},
        secrets={"auth_access_secret": SecretRef("aws", "secret")},
        region="eu-west-1",
    )


@pytest.mark.parametrize(
    ("block", "field", "words"),
    [
        ({"acmeDNS": {"host": "https://auth.acme-dns.io"}}, "dns01.acmeDNS", "no acme-dns"),
        ({"akamai": {"serviceConsumerDomain": "x"}}, "dns01.akamai", "no Akamai"),
        ({"cloudflare": {}}, "dns01.cloudflare", "exactly one of apiTokenSecretRef"),
        (
            {"cloudflare": {"apiKeySecretRef": {"name": "k", "key": "k"}}},
            "dns01.cloudflare.email",
            "required with apiKeySecretRef",
        ),
        (
            {"cloudflare": {"apiTokenSecretRef": {"name": "k"}}},
            "dns01.cloudflare.apiTokenSecretRef.key",
            "required",
        ),
        ({"digitalocean": {}}, "dns01.digitalocean.tokenSecretRef", "required"),
        # Managed and workload identity (no clientSecretSecretRef) are stored, and the
        # Issuer reports them not usable here (tests/cli/test_apply_manifests.py); a service
        # principal needs all its parts, and is not mixed with a managed identity.
        ({"azureDNS": {"managedIdentity": {}}}, "dns01.azureDNS.subscriptionID", "required"),
        (
            {"azureDNS": {"clientSecretSecretRef": {"name": "s", "key": "k"}, "clientID": "c"}},
            "dns01.azureDNS.tenantID",
            "required",
        ),
        (
            {
                "azureDNS": {
                    "subscriptionID": "s",
                    "resourceGroupName": "g",
                    "clientID": "c",
                    "tenantID": "t",
                    "clientSecretSecretRef": {"name": "s", "key": "k"},
                    "managedIdentity": {"clientID": "x"},
                }
            },
            "dns01.azureDNS.managedIdentity",
            "either clientSecretSecretRef or this",
        ),
        (
            {"azureDNS": {"managedIdentity": {"objectID": "x"}}},
            "dns01.azureDNS.managedIdentity.objectID",
            "unsupported",
        ),
        ({"cloudDNS": {"project": 5}}, "dns01.cloudDNS.project", "string"),
        ({"route53": {"role": "arn:aws:iam::1:role/x"}}, "dns01.route53.role", "IAM role ARN"),
        ({"route53": {"auth": {"kubernetes": {}}}}, "dns01.route53.auth", "service account"),
        (
            {"route53": {"accessKeyID": "AKIAEXAMPLE"}},
            "dns01.route53",
            "together with secretAccessKeySecretRef",
        ),
        ({"lexicon": {}}, "dns01.lexicon.provider", "required"),
        ({"lexicon": {"provider": "nosuch"}}, "dns01.lexicon.provider", "no provider 'nosuch'"),
        (
            {"lexicon": {"provider": "powerdns", "pdns_serverr": "http://x"}},
            "dns01.lexicon.pdns_serverr",
            "pdns_server",
        ),
        (
            {"lexicon": {"provider": "powerdns", "auth_token": "s3cret"}},
            "dns01.lexicon.auth_token",
            "credentialsSecretRef",
        ),
        (
            {
                "lexicon": {
                    "provider": "powerdns",
                    "credentialsSecretRef": {"name": "s", "key": "k"},
                }
            },
            "dns01.lexicon.credentialsSecretRef.key",
            "every key of the Secret",
        ),
        (
            {"lexicon": {"provider": "ionos", "api_key": "s3cret"}},
            "dns01.lexicon.api_key",
            "credentialsSecretRef",
        ),
        ({"lexicon": {"provider": "powerdns", "ttl": 0}}, "dns01.lexicon.ttl", "at least 1"),
        ({"cloudflare": {}, "webhook": {"url": "http://x"}}, "dns01", "exactly one provider"),
    ],
)
def test_spec_errors_name_the_field(block: dict[str, Any], field: str, words: str) -> None:
    found = problems(solvers_spec(block))
    path = f"spec.acme.solvers[0].{field}"
    assert path in found, found
    assert any(words in message for message in found[path]), found[path]


def test_inline_lexicon_credentials_move_into_a_secret() -> None:
    result = validate(
        solvers_spec(
            {"lexicon": {"provider": "digitalocean", "credentials": {"auth_token": "tok"}}}
        )
    )
    lexicon = result.spec["acme"]["solvers"][0]["dns01"]["lexicon"]
    assert lexicon == {"provider": "digitalocean", "credentialsSecretRef": {"name": "iss-dns-0"}}
    assert "tok" not in json.dumps(result.spec)
    [write] = result.secrets
    assert write.name == "iss-dns-0" and write.data == {"auth_token": "tok"}
    assert write.path == "spec.acme.solvers[0].dns01.lexicon.credentials"


def test_provider_options_come_from_lexicon() -> None:
    assert {"pdns_server", "auth_token", "pdns_server_id"} <= dnsproviders.provider_options(
        "powerdns"
    )
    assert dnsproviders.provider_problem("powerdns") is None
    assert dnsproviders.providers()["cloudflare"] is True
    assert len(dnsproviders.providers()) > 80


@pytest.mark.django_db
def test_the_registry_picks_the_lexicon_solver() -> None:
    from issuance.acme.solvers.lexicon_dns import LexiconSolver
    from issuance.models import Challenge

    dns01 = {"lexicon": {"provider": "powerdns", "pdns_server": "http://127.0.0.1:1"}}
    challenge = Challenge(type="dns-01", spec={"solver": {"dns01": dns01}})
    solver = solver_for(challenge)
    assert isinstance(solver, LexiconSolver) and solver.plan.provider == "powerdns"
    cloudflare = {"cloudflare": {"apiTokenSecretRef": {"name": "cf", "key": "t"}}}
    challenge = Challenge(type="dns-01", spec={"solver": {"dns01": cloudflare}})
    assert isinstance(solver_for(challenge), LexiconSolver)


def test_tldextract_is_offline() -> None:
    """lexicon's tldextract must never fetch the public suffix list (no internet here)."""
    import tldextract.tldextract as tld

    from issuance.acme.solvers.lexicon_dns import _offline_tldextract

    _offline_tldextract()
    assert tld.TLD_EXTRACTOR.suffix_list_urls == ()
    assert tld.extract("www.example.co.uk").suffix == "co.uk"  # the bundled snapshot


def test_provider_http_calls_get_a_timeout() -> None:
    """lexicon's providers call requests without a timeout; inside http_timeout each call
    gets HTTP_TIMEOUT (seen at the connection, no network needed), outside nothing changes."""
    import requests
    from requests.adapters import HTTPAdapter

    from issuance.acme.solvers.lexicon_dns import HTTP_TIMEOUT, http_timeout

    seen: list[Any] = []

    class Stop(Exception):
        pass

    class Connection:
        def urlopen(self, **kwargs: Any) -> Any:
            seen.append(kwargs["timeout"])
            raise Stop

    class Recording(HTTPAdapter):
        def get_connection_with_tls_context(self, *args: Any, **kwargs: Any) -> Any:
            return Connection()

    session = requests.Session()
    session.mount("http://", Recording())
    with http_timeout(), pytest.raises(Stop):
        session.get("http://provider.invalid/zones")
    with pytest.raises(Stop):
        session.get("http://provider.invalid/zones")
    with http_timeout(), pytest.raises(Stop):
        session.get("http://provider.invalid/zones", timeout=3)
    inside, outside, explicit = seen
    assert (inside.connect_timeout, inside.read_timeout) == HTTP_TIMEOUT
    assert outside.connect_timeout is None and outside.read_timeout is None
    assert explicit.connect_timeout == 3


@pytest.mark.django_db
def test_applied_inline_credentials_are_stored_encrypted_and_never_shown() -> None:
    from issuance.acme.solvers.lexicon_dns import read_secret_data
    from issuance.models import Event, Issuer, Secret
    from issuance.specs import apply_issuer

    spec = solvers_spec(
        {"lexicon": {"provider": "digitalocean", "credentials": {"auth_token": "tok-s3cret"}}}
    )
    apply_issuer("lex", spec, actor="tester")
    issuer = Issuer.objects.get(name="lex")
    assert "tok-s3cret" not in json.dumps(issuer.spec)
    stored = Secret.objects.get(name="lex-dns-0")
    assert "tok-s3cret" not in stored.tls_key_ciphertext
    assert read_secret_data("lex-dns-0") == {"auth_token": "tok-s3cret"}
    assert not any("tok-s3cret" in e.message for e in Event.objects.all())


# -- every block the spec accepts works in the default install --------------------------

AWS_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_ROUTE_53",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def _rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _service_account() -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "my-project",
            "client_email": "dns@my-project.iam.gserviceaccount.com",
            "private_key": _rsa_pem(),
        }
    )


# One valid block of each provider kind the spec accepts, credentials inline (the spec
# moves them into a Secret, the solver reads them back from it), and the option of the
# built provider where the credential must arrive.
CERT_MANAGER_BLOCKS: dict[str, tuple[dict[str, Any], str, str]] = {
    "cloudflare-token": ({"cloudflare": {"apiToken": "cf-tok"}}, "auth_token", "cf-tok"),
    "cloudflare-key": (
        {"cloudflare": {"email": "ops@example.com", "apiKey": "cf-key"}},
        "auth_token",
        "cf-key",
    ),
    "route53-keys": (
        {
            "route53": {
                "region": "eu-west-1",
                "accessKeyID": "AKIAEXAMPLE",
                "secretAccessKey": "aws-s3cret",
                "hostedZoneID": "Z0123456789",
            }
        },
        "auth_access_secret",
        "aws-s3cret",
    ),
    "route53-ambient": ({"route53": {"region": "eu-west-1"}}, "auth_access_secret", ""),
    "digitalocean": ({"digitalocean": {"token": "do-tok"}}, "auth_token", "do-tok"),
    "azureDNS": (
        {
            "azureDNS": {
                "clientID": "app",
                "clientSecret": "az-s3cret",
                "subscriptionID": "sub",
                "tenantID": "tenant",
                "resourceGroupName": "rg",
                "hostedZoneName": "example.test",
            }
        },
        "auth_client_secret",
        "az-s3cret",
    ),
    "cloudDNS": (
        {"cloudDNS": {"project": "my-project", "serviceAccount": "<service account>"}},
        "auth_service_account_info",
        "base64::",
    ),
}


def _applied_dns01(name: str, dns01: dict[str, Any]) -> dict[str, Any]:
    """The dns01 block as stored by applying an Issuer with it (secrets moved out)."""
    from issuance.models import Issuer
    from issuance.specs import apply_issuer

    apply_issuer(name, solvers_spec(dns01), actor="tester")
    stored: dict[str, Any] = Issuer.objects.get(name=name).spec["acme"]["solvers"][0]["dns01"]
    return stored


def _solver(dns01: dict[str, Any]) -> Any:
    from issuance.models import Challenge

    return solver_for(Challenge(type="dns-01", spec={"solver": {"dns01": dns01}}))


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection or name lookup fails the test: building a provider must not call out."""
    import socket

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network call while building a provider: {args[:2]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(CERT_MANAGER_BLOCKS))
def test_every_cert_manager_block_builds_its_lexicon_provider(
    kind: str, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    """Applied as an Issuer, each accepted cert-manager block gives a solver whose lexicon
    provider is importable here and is built with the credential from its Secret."""
    from lexicon._private.discovery import load_provider_module

    from issuance.acme.solvers.lexicon_dns import LexiconSolver

    for name in AWS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    # The ambient form: boto3's own chain, here its environment variables.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-s3cret")
    block, option, wanted = CERT_MANAGER_BLOCKS[kind]
    if kind == "cloudDNS":
        block = {"cloudDNS": {**block["cloudDNS"], "serviceAccount": _service_account()}}
    dns01 = _applied_dns01(kind.lower(), block)
    solver = _solver(dns01)
    assert isinstance(solver, LexiconSolver)
    [key] = block
    assert solver.plan.provider == dnsproviders.CERT_MANAGER_PROVIDERS[key]
    provider = solver.build_provider("example.test")
    assert isinstance(provider, load_provider_module(solver.plan.provider).Provider)
    got = provider._get_provider_option(option) or ""
    assert got.startswith(wanted) if wanted else got == ""
    if key == "route53":
        credentials = provider.r53_client._request_signer._credentials
        pair = (credentials.access_key, credentials.secret_key)
        assert pair == (("AKIAEXAMPLE", wanted) if wanted else ("AKIAENVIRONMENT", "env-s3cret"))
        # Route 53 is global: a commercial region means the aws partition's endpoint.
        assert provider.r53_client.meta.endpoint_url == "https://route53.amazonaws.com"


@pytest.mark.django_db
def test_route53_client_gets_the_region_zone_and_keys(
    monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    """route53's region reaches the boto3 client (cn-north-1: the aws-cn partition's
    Route 53 endpoint, which a client without it would never use), hostedZoneID is the zone lexicon writes to, and the access key pair from
    the block and its Secret signs the requests."""
    for name in AWS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    dns01 = _applied_dns01(
        "r53",
        {
            "route53": {
                "region": "cn-north-1",
                "accessKeyID": "AKIAEXAMPLE",
                "secretAccessKey": "aws-s3cret",
                "hostedZoneID": "Z0123456789",
            }
        },
    )
    provider = _solver(dns01).build_provider("example.test")
    client = provider.r53_client
    assert client.meta.region_name == "aws-cn-global"  # boto3: Route 53 of that partition
    assert client.meta.endpoint_url == "https://route53.amazonaws.com.cn"
    assert provider.domain_id == "Z0123456789"
    credentials = client._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key) == ("AKIAEXAMPLE", "aws-s3cret")
    # Without a region: boto3's global endpoint.
    global_dns01 = {"route53": {**dns01["route53"]}}
    del global_dns01["route53"]["region"]
    client = _solver(global_dns01).build_provider("example.test").r53_client
    assert client.meta.endpoint_url == "https://route53.amazonaws.com"


# Options whose value lexicon parses when the provider is built (a plain "x" will not do).
LEXICON_OPTION_VALUES = {
    "ddns": {"auth_token": "hmac-sha256:key.:c2VjcmV0"},
    "gandi": {"api_protocol": "rest"},
    "hover": {"auth_totp_secret": "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"},
}


def _lexicon_block(provider: str) -> dict[str, Any]:
    """A `lexicon` block giving every option of `provider`: plain ones inline, credentials
    in `credentials` (moved into a Secret)."""
    block: dict[str, Any] = {"provider": provider}
    credentials: dict[str, str] = {}
    for option in sorted(dnsproviders.provider_options(provider)):
        value = LEXICON_OPTION_VALUES.get(provider, {}).get(option, "x")
        if provider == "googleclouddns" and option == "auth_service_account_info":
            value = "base64::" + base64.b64encode(_service_account().encode()).decode()
        if provider == "transip" and option == "auth_api_key":
            value = "base64::" + base64.b64encode(_rsa_pem().encode()).decode()
        if dnsproviders.is_secret_option(option):
            credentials[option] = value
        elif option not in dnsproviders.OWN_OPTIONS:
            block[option] = value
    if credentials:
        block["credentials"] = credentials
    return block


@pytest.mark.django_db
@pytest.mark.parametrize("provider", sorted(dnsproviders.providers()))
def test_every_lexicon_provider_is_built_or_refused_naming_the_field(
    provider: str, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    """The `lexicon` block with any provider dns-lexicon has: accepted only when its
    provider can be built here (its extra packages installed), else refused at validation
    naming `provider` and the extra to install. Never accepted and then broken at issuance."""
    from lexicon._private.discovery import load_provider_module

    for name in AWS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    block = _lexicon_block(provider)
    if not dnsproviders.providers()[provider]:
        found = problems(solvers_spec({"lexicon": block}))
        messages = found["spec.acme.solvers[0].dns01.lexicon.provider"]
        assert any(f"dns-lexicon[{provider}]" in m for m in messages), messages
        return
    solver = _solver(_applied_dns01(f"lex-{provider}", {"lexicon": block}))
    built = solver.build_provider("example.test")
    assert isinstance(built, load_provider_module(provider).Provider)
    for option, value in block.get("credentials", {}).items():
        assert built._get_provider_option(option) == value


def test_route53_and_the_cert_manager_providers_are_installed() -> None:
    """The default install serves every cert-manager block the spec maps (route53's boto3
    is a dependency, not an extra to add by hand)."""
    for key, provider in dnsproviders.CERT_MANAGER_PROVIDERS.items():
        assert dnsproviders.provider_problem(provider) is None, key


@pytest.mark.django_db
def test_rfc2136_and_webhook_blocks_build_their_solvers(no_network: None) -> None:
    """The two blocks served by our own solvers: rfc2136 loads its TSIG key from the
    Secret the inline key went to; webhook keeps its URL. Neither calls out when built."""
    import dns.tsig

    from issuance.acme.solvers.rfc2136 import Rfc2136Solver, load_config
    from issuance.acme.solvers.webhook import WebhookSolver

    secret = base64.b64encode(b"tsig-key-bytes-0123456789abcdef").decode()
    rfc2136 = _applied_dns01(
        "rfc",
        {
            "rfc2136": {
                "nameserver": "127.0.0.1:5353",
                "tsigKeyName": "acme-key",
                "tsigAlgorithm": "HMACSHA256",
                "tsigSecret": secret,
            }
        },
    )
    solver = _solver(rfc2136)
    assert isinstance(solver, Rfc2136Solver)
    loaded = load_config(solver.config)
    assert (loaded.host, loaded.port) == ("127.0.0.1", 5353)
    assert loaded.key is not None and loaded.key.algorithm == dns.tsig.HMAC_SHA256
    assert loaded.key.secret == b"tsig-key-bytes-0123456789abcdef"
    webhook = _solver(_applied_dns01("hook", {"webhook": {"url": "http://127.0.0.1:9/hook"}}))
    assert isinstance(webhook, WebhookSolver) and webhook.url == "http://127.0.0.1:9/hook"
