"""dns01 provider blocks served by dns-lexicon: cert-manager's blocks as written in
manifests, our `lexicon` block, their mapping onto lexicon providers, and the spec errors
(each naming its field)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

from issuance.solvers import dnsproviders
from issuance.solvers.dnsproviders import LexiconPlan, SecretRef, plan_for
from issuance.solvers.registry import solver_for
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
        (
            {"azureDNS": {"managedIdentity": {"clientID": "x"}}},
            "dns01.azureDNS.managedIdentity",
            "service principal",
        ),
        ({"cloudDNS": {"project": "p"}}, "dns01.cloudDNS.serviceAccountSecretRef", "required"),
        ({"route53": {"role": "arn:aws:iam::1:role/x"}}, "dns01.route53.role", "IAM role"),
        ({"route53": {}}, "dns01.route53", "dns-lexicon[route53]"),
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
    from issuance.models import Challenge
    from issuance.solvers.lexicon_dns import LexiconSolver

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

    from issuance.solvers.lexicon_dns import _offline_tldextract

    _offline_tldextract()
    assert tld.TLD_EXTRACTOR.suffix_list_urls == ()
    assert tld.extract("www.example.co.uk").suffix == "co.uk"  # the bundled snapshot


def test_provider_http_calls_get_a_timeout() -> None:
    """lexicon's providers call requests without a timeout; inside http_timeout each call
    gets HTTP_TIMEOUT (seen at the connection, no network needed), outside nothing changes."""
    import requests
    from requests.adapters import HTTPAdapter

    from issuance.solvers.lexicon_dns import HTTP_TIMEOUT, http_timeout

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
    from issuance.models import Event, Issuer, Secret
    from issuance.solvers.lexicon_dns import read_secret_data
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
