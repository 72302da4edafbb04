"""DNS-01 through cert-manager's `route53` block, end to end against a local Route 53 API.

moto's server mode (tests/e2e/servers.py `start_moto`) is the Route 53 API; the worker's
boto3 client reaches it through AWS_ENDPOINT_URL_ROUTE_53, the standard boto3 setting, set
in this process's environment (the worker runs in it): no endpoint setting in the product.
moto has the API but no nameservers, so `Route53Nameserver` answers DNS for the hosted
zone from the record sets the API holds at each query, as Route 53's own nameservers do.
Pebble validates against it for real (no PEBBLE_VA_ALWAYS_VALID) and the product's
preflight and self-check ask it through SELF_CHECK_NAMESERVERS, as the other DNS-01 tests
do with BIND9 and PowerDNS.

Each test issues a certificate through the worker (preflight, present, self-check, Pebble's
validation, cleanup) and reads the TXT records through the Route 53 API just before each
cleanup (so after Pebble validated) and at the end: every value was in the hosted zone,
none is left, and someone else's value at a challenge name stays. The credentials come from
the block (accessKeyID + a Secret, as cert-manager manifests have them) or from boto3's own
chain (the worker's environment); hostedZoneID picks the zone when two have the same name.
Neither secret appears in the log (captured at DEBUG, boto3's included) or in any event.

moto is run without signature checks: its check rejects the Route 53 GET requests boto3
signs correctly (SignatureDoesNotMatch on ListResourceRecordSets), so it cannot tell a
wrong secret from a right one here; the unit tests (tests/specs/test_dns_providers.py)
show the secret from the Secret is the client's.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from pytest_django import Settings

from issuance.acme.solvers import lexicon_dns, preflight_step
from issuance.acme.solvers.base import txt_value
from issuance.acme.solvers.lexicon_dns import LexiconSolver
from issuance.models import Certificate, Challenge, Event, Issuer
from issuance.specs import validate_issuer_spec
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.conftest import AcmeStack, Drive
from tests.e2e.servers import MotoServer, Route53Nameserver, start_moto
from tests.e2e.test_dns01 import ECDSA, assert_issued, done
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ACCESS_KEY = "AKIAROUTE53E2ETEST"
SECRET_KEY = "r53-secret-" + secrets.token_hex(12)
AMBIENT_KEY = "AKIAAMBIENTE2ETEST"
AMBIENT_SECRET = "r53-ambient-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = start_moto(Path(tmp_path_factory.mktemp("moto-e2e")))
    yield server
    server.stop()


@dataclass
class HostedZone:
    name: str
    zone_id: str  # as a user writes hostedZoneID: without "/hostedzone/"
    nameserver: Route53Nameserver

    def txt(self, name: str) -> list[str]:
        return self.nameserver.txt(name)


@pytest.fixture
def aws_env(moto: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The worker's AWS environment: the Route 53 endpoint is moto; nothing else of the
    machine's AWS setup (profiles, instance metadata) is read."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_ROUTE_53", moto.url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def hosted_zones(moto: MotoServer) -> Iterator[Callable[[str], HostedZone]]:
    """Make hosted zones in moto (each with its nameserver); deleted afterwards."""
    client = moto.client("route53", "AKIATESTREADER", "reader")
    made: list[HostedZone] = []

    def make(name: str) -> HostedZone:
        zone = client.create_hosted_zone(Name=name, CallerReference=secrets.token_hex(8))
        zone_id = zone["HostedZone"]["Id"].removeprefix("/hostedzone/")
        made.append(HostedZone(name, zone_id, Route53Nameserver(client, zone_id)))
        return made[-1]

    yield make
    for zone in made:
        zone.nameserver.stop()
        for record_set in zone.nameserver.record_sets():
            if record_set["Type"] not in ("SOA", "NS"):
                client.change_resource_record_sets(
                    HostedZoneId=zone.zone_id,
                    ChangeBatch={
                        "Changes": [{"Action": "DELETE", "ResourceRecordSet": record_set}]
                    },
                )
        client.delete_hosted_zone(Id=zone.zone_id)


def route53_stack(
    acme_stack: Callable[..., AcmeStack], zone: HostedZone, settings: Settings
) -> AcmeStack:
    stack = acme_stack(dns_server=zone.nameserver.address, serve_http01=False)
    # Preflight and self-check ask the hosted zone's nameserver too.
    settings.SELF_CHECK_NAMESERVERS = [zone.nameserver.address]
    return stack


def make_route53_issuer(stack: AcmeStack, name: str, block: dict[str, Any]) -> Any:
    spec = stack.issuer_spec(solvers=[{"dns01": {"route53": block}}])
    plan = validate_issuer_spec(name, spec)  # the spec accepts the block as written
    assert plan.spec["acme"]["solvers"][0]["dns01"] == {"route53": block}
    return stack.make_issuer(name, solvers=plan.spec["acme"]["solvers"])


def record_cleanups(
    zones: list[HostedZone], monkeypatch: pytest.MonkeyPatch
) -> dict[str, list[list[str]]]:
    """TXT values at each challenge's name in each zone, read through the Route 53 API just
    before the solver removes them (after Pebble validated): value → one list per zone."""
    seen: dict[str, list[list[str]]] = {}
    real_cleanup = LexiconSolver.cleanup

    def cleanup(self: LexiconSolver, challenge: Challenge) -> None:
        fqdn = f"_acme-challenge.{challenge.dns_name}"
        seen[txt_value(challenge)] = [zone.txt(fqdn) for zone in zones]
        real_cleanup(self, challenge)

    monkeypatch.setattr(LexiconSolver, "cleanup", cleanup)
    return seen


def assert_no_secret_anywhere(secret: str, caplog: pytest.LogCaptureFixture) -> None:
    assert caplog.text, "nothing was logged: the capture is not working"
    assert "route53" in caplog.text  # lexicon/boto3 talked to Route 53 in this log
    assert secret not in caplog.text
    assert not any(secret in e.message for e in Event.objects.all())
    for model in (Certificate, Challenge, Issuer):
        for obj in model.objects.all():
            assert secret not in repr(obj.conditions)


def test_issued_through_route53_with_keys_from_a_secret_and_hosted_zone_id(
    acme_stack: Callable[..., AcmeStack],
    aws_env: None,
    hosted_zones: Callable[[str], HostedZone],
    drive: Drive,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    domain = f"k{secrets.token_hex(3)}.r53.test"
    # Two hosted zones with the same name: lexicon's lookup by name would take the first;
    # hostedZoneID must send every change to the second, the one the nameserver serves.
    decoy = hosted_zones(domain)
    zone = hosted_zones(domain)
    stack = route53_stack(acme_stack, zone, settings)
    with transaction.atomic():  # store() locks the row
        store(
            SecretWrite(
                name="route53-credentials",
                path="test",
                type=OPAQUE,
                data={"secret-access-key": SECRET_KEY},
            )
        )
    issuer = make_route53_issuer(
        stack,
        "r53-keys",
        {
            "region": "us-east-1",
            "accessKeyID": ACCESS_KEY,
            "secretAccessKeySecretRef": {"name": "route53-credentials", "key": "secret-access-key"},
            "hostedZoneID": zone.zone_id,
        },
    )
    # Someone else's TXT value at one challenge name: cleanup must leave it.
    reader = zone.nameserver.route53
    reader.change_resource_record_sets(
        HostedZoneId=zone.zone_id,
        ChangeBatch={
            "Changes": [
                {
                    "Action": "CREATE",
                    "ResourceRecordSet": {
                        "Name": f"_acme-challenge.www.{domain}",
                        "Type": "TXT",
                        "TTL": 60,
                        "ResourceRecords": [{"Value": '"not-ours"'}],
                    },
                }
            ]
        },
    )
    seen = record_cleanups([zone, decoy], monkeypatch)

    names = [domain, f"*.{domain}", f"www.{domain}"]
    make_certificate("r53-keys", issuer, dnsNames=names, privateKey=ECDSA)
    drive(done("r53-keys"), timeout=180)
    challenges = assert_issued(stack, "r53-keys", names)

    # Each value was in the hosted zone while Pebble validated it, never in the decoy.
    assert len(challenges) == 3
    for chal in challenges:
        in_zone, in_decoy = seen[txt_value(chal)]
        assert txt_value(chal) in in_zone, chal.dns_name
        assert in_decoy == []
    # All gone afterwards, the other value kept.
    assert zone.txt(f"_acme-challenge.{domain}") == []
    assert zone.txt(f"_acme-challenge.www.{domain}") == ["not-ours"]
    assert sorted(r["Type"] for r in decoy.nameserver.record_sets()) == ["NS", "SOA"]
    issuer.refresh_from_db()
    assert issuer.condition_is(preflight_step.CONDITION)
    assert_no_secret_anywhere(SECRET_KEY, caplog)


def test_issued_through_route53_with_the_workers_aws_environment(
    acme_stack: Callable[..., AcmeStack],
    aws_env: None,
    hosted_zones: Callable[[str], HostedZone],
    drive: Drive,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No keys in the block: boto3's chain finds the worker's AWS_ACCESS_KEY_ID /
    AWS_SECRET_ACCESS_KEY, and without hostedZoneID the zone is found by its name."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AMBIENT_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AMBIENT_SECRET)
    domain = f"a{secrets.token_hex(3)}.r53.test"
    zone = hosted_zones(domain)
    stack = route53_stack(acme_stack, zone, settings)
    issuer = make_route53_issuer(stack, "r53-ambient", {"region": "eu-west-1"})
    seen = record_cleanups([zone], monkeypatch)

    make_certificate("r53-ambient", issuer, dnsNames=[f"api.{domain}"], privateKey=ECDSA)
    drive(done("r53-ambient"), timeout=120)
    [chal] = assert_issued(stack, "r53-ambient", [f"api.{domain}"])
    assert seen[txt_value(chal)] == [[txt_value(chal)]]
    assert zone.txt(f"_acme-challenge.api.{domain}") == []
    assert_no_secret_anywhere(AMBIENT_SECRET, caplog)


def test_issued_through_route53_with_an_assumed_role(
    acme_stack: Callable[..., AcmeStack],
    aws_env: None,
    moto: MotoServer,
    hosted_zones: Callable[[str], HostedZone],
    drive: Drive,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`role`: the worker's credentials only call STS AssumeRole (moto serves STS too);
    every Route 53 client the solver makes signs with the role's temporary key."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AMBIENT_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AMBIENT_SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto.url)
    signing_keys: list[str] = []
    real_client = lexicon_dns.route53_client

    def recording_client(options: Any, region: str, role: str = "") -> Any:
        client = real_client(options, region, role)
        signing_keys.append(client._request_signer._credentials.access_key)
        return client

    monkeypatch.setattr(lexicon_dns, "route53_client", recording_client)
    domain = f"a{secrets.token_hex(3)}.r53.test"
    zone = hosted_zones(domain)
    stack = route53_stack(acme_stack, zone, settings)
    role = "arn:aws:iam::123456789012:role/dns-manager"
    issuer = make_route53_issuer(stack, "r53-role", {"region": "eu-west-1", "role": role})

    make_certificate("r53-role", issuer, dnsNames=[f"api.{domain}"], privateKey=ECDSA)
    drive(done("r53-role"), timeout=120)
    assert_issued(stack, "r53-role", [f"api.{domain}"])
    assert zone.txt(f"_acme-challenge.api.{domain}") == []
    assert signing_keys, "no Route 53 client was made"
    # moto's AssumeRole hands out temporary keys (ASIA…), never the worker's own.
    assert all(key.startswith("ASIA") for key in signing_keys), signing_keys
    assert "AssumeRole" in caplog.text
    assert_no_secret_anywhere(AMBIENT_SECRET, caplog)
