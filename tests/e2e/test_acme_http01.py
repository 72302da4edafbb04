"""ACME issuance end to end: Pebble, HTTP-01 answered by the app, the real worker.

Pebble keeps its default 5 % nonce rejection in these tests (badNonce retries happen).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from cryptography import x509
from pytest_django import Settings

from issuance.acme.accounts import client_for
from issuance.acme.protocol import exchange as acme_exchange
from issuance.models import Certificate, CertificateRequest, Challenge, Issuer, Order, Secret
from issuance.operations import actions
from issuance.pki.x509 import split_pem_chain
from tests.e2e.conftest import AcmeStack, Drive
from tests.e2e.servers import verify_chain
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}


def ready(name: str) -> Callable[[], bool]:
    return lambda: Certificate.objects.get(name=name).condition_is("Ready")


def issuer_ready(issuer: Issuer) -> Callable[[], bool]:
    return lambda: Issuer.objects.get(pk=issuer.pk).is_ready


def assert_issued(stack: AcmeStack, name: str, dns_names: list[str]) -> str:
    cert = Certificate.objects.get(name=name)
    assert cert.condition_is("Ready"), cert.conditions
    secret = Secret.objects.get(name=cert.secret_name)
    chain = secret.tls_crt
    blocks = split_pem_chain(chain)
    assert len(blocks) >= 2, "leaf and intermediate expected"
    verify_chain(chain, stack.pebble.roots())
    leaf = x509.load_pem_x509_certificate(blocks[0].encode())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(sans.get_values_for_type(x509.DNSName)) == sorted(dns_names)
    request = CertificateRequest.objects.filter(certificate=cert).latest("created_at")
    assert request.ca_pem == blocks[-1], "the CA is the chain's last certificate"
    order = Order.objects.get(request=request)
    assert order.state == "valid"
    assert order.certificate_pem == chain
    return chain


def test_http01_single_name(acme_stack: Callable[..., AcmeStack], drive: Drive) -> None:
    stack = acme_stack()
    issuer = stack.make_issuer()
    drive(issuer_ready(issuer), timeout=30)
    issuer.refresh_from_db()
    assert issuer.acme_account_uri.startswith(stack.pebble.directory_url.rsplit("/", 1)[0])
    cond = issuer.get_condition("Ready")
    assert cond is not None
    assert cond["reason"] == "ACMEAccountRegistered"

    make_certificate("web", issuer, dnsNames=["web.example.test"], privateKey=ECDSA)
    drive(ready("web"), timeout=90)
    assert_issued(stack, "web", ["web.example.test"])
    [challenge] = Challenge.objects.filter(order__request__certificate__name="web")
    assert challenge.type == "http-01"
    assert challenge.state == "valid"
    assert challenge.finished
    assert not challenge.processing
    order = challenge.order
    assert order.authorizations[0]["identifier"] == "web.example.test"
    # Exactly one ACME order for this account.
    assert client_for(issuer).list_orders() == [order.url]


def test_http01_multi_san(acme_stack: Callable[..., AcmeStack], drive: Drive) -> None:
    stack = acme_stack()
    issuer = stack.make_issuer()
    names = ["a.example.test", "b.example.test", "c.example.org"]
    make_certificate("multi", issuer, dnsNames=names, privateKey=ECDSA)
    drive(ready("multi"), timeout=120)
    assert_issued(stack, "multi", names)
    challenges = Challenge.objects.filter(order__request__certificate__name="multi")
    assert sorted(c.dns_name for c in challenges) == sorted(names)
    assert {c.state for c in challenges} == {"valid"}


def test_bad_nonce_is_retried_over_a_multi_certificate_run(
    acme_stack: Callable[..., AcmeStack], drive: Drive
) -> None:
    # A higher rejection rate than Pebble's default 5 % so the retry certainly happens.
    stack = acme_stack(pebble_env={"PEBBLE_WFE_NONCEREJECT": "30"})
    issuer = stack.make_issuer()
    before = acme_exchange.stats().get("bad_nonce", 0)
    for i in range(3):
        make_certificate(f"nonce-{i}", issuer, dnsNames=[f"n{i}.example.test"], privateKey=ECDSA)
    drive(lambda: all(ready(f"nonce-{i}")() for i in range(3)), timeout=150)
    for i in range(3):
        assert_issued(stack, f"nonce-{i}", [f"n{i}.example.test"])
    assert acme_exchange.stats().get("bad_nonce", 0) - before >= 1


def test_eab_required(acme_stack: Callable[..., AcmeStack], drive: Drive) -> None:
    stack = acme_stack(eab_required=True)
    # No EAB: refused with a clear reason.
    bare = stack.make_issuer("no-eab")
    drive(lambda: Issuer.objects.get(pk=bare.pk).get_condition("Ready") is not None, 30)
    bare.refresh_from_db()
    cond = bare.get_condition("Ready")
    assert cond is not None
    assert cond["status"] == "False"
    assert cond["reason"] == "ErrRegisterACMEAccount"
    assert "External Account Binding" in cond["message"]

    # Wrong HMAC key: the CA's problem detail is the message.
    import json

    bad = Secret(name="bad-eab", type="Opaque")
    bad.tls_key = json.dumps({"secret": "c2VjcmV0LWJ1dC13cm9uZy1zZWNyZXQtYnV0LXdyb25nLXh4eA"})
    bad.save()
    wrong = stack.make_issuer(
        "wrong-eab",
        externalAccountBinding={
            "keyID": "kid-1",
            "keySecretRef": {"name": "bad-eab", "key": "secret"},
        },
    )
    drive(lambda: Issuer.objects.get(pk=wrong.pk).get_condition("Ready") is not None, 30)
    wrong.refresh_from_db()
    cond = wrong.get_condition("Ready")
    assert cond is not None
    assert cond["status"] == "False"
    assert cond["reason"] == "ErrRegisterACMEAccount"
    assert "urn:ietf:params:acme:error:" in cond["message"]

    good_secret = Secret(name="pebble-eab", type="Opaque")
    good_secret.tls_key = json.dumps({"secret": stack.pebble.eab_keys["kid-2"]})
    good_secret.save()
    issuer = stack.make_issuer(
        "eab",
        externalAccountBinding={
            "keyID": "kid-2",
            "keySecretRef": {"name": "pebble-eab", "key": "secret"},
        },
    )
    drive(issuer_ready(issuer), timeout=30)
    make_certificate("eab-web", issuer, dnsNames=["eab.example.test"], privateKey=ECDSA)
    drive(ready("eab-web"), timeout=90)
    assert_issued(stack, "eab-web", ["eab.example.test"])


def test_failing_challenge_backoff_and_force_renew(
    acme_stack: Callable[..., AcmeStack], drive: Drive, settings: Settings
) -> None:
    """Pebble resolves the name to 127.0.0.2 (nothing listens) while our self-check sees
    127.0.0.1: the self-check passes, the CA's validation fails with its own reason."""
    stack = acme_stack()
    issuer = stack.make_issuer()
    from tests.e2e.servers import start_challtestsrv

    self_check_dns = start_challtestsrv(stack.workdir / "selfcheck-dns")
    try:
        settings.SELF_CHECK_NAMESERVERS = [self_check_dns.dns_address]
        stack.dns.add_a("broken.example.test", ["127.0.0.2"])
        cert = make_certificate(
            "broken", issuer, dnsNames=["broken.example.test"], privateKey=ECDSA
        )

        def failed() -> bool:
            c = Certificate.objects.get(pk=cert.pk)
            return bool(c.failed_issuance_attempts)

        drive(failed, timeout=120)
        cert.refresh_from_db()
        assert not cert.condition_is("Ready")
        assert cert.failed_issuance_attempts == 1
        assert cert.last_failure_time is not None
        assert cert.next_retry_time == cert.last_failure_time + timedelta(hours=1)
        request = CertificateRequest.objects.get(certificate=cert)
        assert request.state == "Failed"
        ready_cond = request.get_condition("Ready")
        assert ready_cond is not None
        assert "OrderFailed: urn:ietf:params:acme:error:" in ready_cond["message"]
        order = Order.objects.get(request=request)
        assert order.state == "invalid"
        assert order.reason.startswith("urn:ietf:params:acme:error:")
        assert order.failure_time is not None
        # The CA's reason reaches the Certificate's conditions.
        assert "urn:ietf:params:acme:error:" in json_text(cert.conditions), cert.conditions

        # Fix DNS, force a renewal during the backoff: a new attempt, which succeeds.
        stack.dns.clear_a("broken.example.test")
        actions.force_renew(cert, "tester")
        drive(ready("broken"), timeout=120)
        assert CertificateRequest.objects.filter(certificate=cert).count() == 2
        assert Order.objects.filter(request__certificate=cert).count() == 2
        assert_issued(stack, "broken", ["broken.example.test"])
        cert.refresh_from_db()
        assert not cert.failed_issuance_attempts
        assert cert.next_retry_time is None
    finally:
        self_check_dns.stop()


def json_text(value: Any) -> str:
    import json

    return json.dumps(value)


def test_worker_killed_mid_order_finishes_without_a_second_order(
    acme_stack: Callable[..., AcmeStack], drive: Drive
) -> None:
    """The process dies after the CA created the order but before its URL was stored."""
    from django.utils import timezone

    from issuance.controllers import faults
    from issuance.models import Order as OrderModel

    stack = acme_stack()
    issuer = stack.make_issuer()
    drive(issuer_ready(issuer), timeout=30)
    make_certificate("crash", issuer, dnsNames=["crash.example.test"], privateKey=ECDSA)
    faults.CRASH_AT = "order-after-new-order"
    try:
        with pytest.raises(faults.SimulatedCrash):
            drive(lambda: False, timeout=60)
    finally:
        faults.CRASH_AT = None
    order = OrderModel.objects.get(request__certificate__name="crash")
    assert order.url == ""
    assert order.create_attempted_at is not None
    issuer.refresh_from_db()
    client = client_for(issuer)
    assert len(client.list_orders()) == 1, "the CA made the order before the crash"

    # "Restart": the dead worker's leases run out; a new worker takes over.
    for model in (Certificate, CertificateRequest, OrderModel, Challenge, Issuer):
        model.objects.filter(lease_owner__gt="").update(lease_until=timezone.now())
    drive(ready("crash"), timeout=90)
    assert_issued(stack, "crash", ["crash.example.test"])
    order.refresh_from_db()
    assert client.list_orders() == [order.url], "a second ACME order was created"
    from issuance.models import Event

    assert Event.objects.filter(kind="Order", name=order.name, reason="OrderRecovered").exists()


def test_preferred_chain_picks_the_alternate_root(
    acme_stack: Callable[..., AcmeStack], drive: Drive
) -> None:
    stack = acme_stack(pebble_env={"PEBBLE_ALTERNATE_ROOTS": "1"})
    roots = [x509.load_pem_x509_certificate(p.encode()) for p in stack.pebble.roots()]
    assert len(roots) == 2
    cns = [r.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value for r in roots]
    for index, cn in enumerate(cns):
        issuer = stack.make_issuer(f"chain-{index}", preferredChain=str(cn))
        make_certificate(
            f"chain-{index}", issuer, dnsNames=[f"chain{index}.example.test"], privateKey=ECDSA
        )
    drive(lambda: ready("chain-0")() and ready("chain-1")(), timeout=120)
    for index in range(2):
        chain = assert_issued(stack, f"chain-{index}", [f"chain{index}.example.test"])
        anchor = verify_chain(chain, stack.pebble.roots())
        assert anchor.subject == roots[index].subject
