"""DNS-01 solvers against a real BIND9: RFC 2136 with TSIG, the webhook, the TXT self-check,
and the challenges controller's present / clean-up steps (no CA needed for those)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.nameserver
import dns.resolver
import pytest
from django.db import transaction
from pytest_django import Settings

from issuance.acme.solvers.base import (
    SolverConfigError,
    dns01_txt_value,
    parse_hostport,
    txt_record_name,
)
from issuance.acme.solvers.registry import solver_for
from issuance.acme.solvers.rfc2136 import Rfc2136Solver, load_config
from issuance.acme.solvers.selfcheck import authoritative_nameservers, check_dns01
from issuance.acme.solvers.webhook import WebhookSolver
from issuance.controllers import challenges as controller
from issuance.controllers.base import TemporaryError
from issuance.models import Challenge, Event, Order
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.bind9 import Bind9Server, bind9_server, start_webhook_provider
from tests.factories import make_acme_issuer, make_challenge, make_order

pytestmark = [pytest.mark.e2e, pytest.mark.django_db]


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bind9Server]:
    with bind9_server(Path(tmp_path_factory.mktemp("bind"))) as server:
        yield server


def rfc2136_solver_config(bind: Bind9Server, secret_name: str = "tsig") -> dict[str, Any]:
    with transaction.atomic():  # store() locks the row
        store(SecretWrite(name=secret_name, path="test", type=OPAQUE, data={"secret": bind.secret}))
    return {
        "dns01": {
            "rfc2136": {
                "nameserver": bind.address,
                "tsigKeyName": bind.key_name,
                "tsigAlgorithm": bind.cert_manager_algorithm,
                "tsigSecretSecretRef": {"name": secret_name, "key": "secret"},
            }
        }
    }


@pytest.fixture
def order() -> Order:
    return make_order(make_acme_issuer())


def dns_challenge(
    order: Order, name: str, solver: dict[str, Any], key_auth: str, **fields: Any
) -> Challenge:
    # As the orders controller (and cert-manager) do: a dns-01 spec.key is the TXT value.
    key = dns01_txt_value(key_auth)
    return make_challenge(order, name, "dns-01", solver=solver, key=key, **fields)


def test_rfc2136_adds_and_removes_only_its_own_value(
    bind: Bind9Server, order: Order, settings: Settings
) -> None:
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    solver_config = rfc2136_solver_config(bind)
    first = dns_challenge(order, "www.example.test", solver_config, "k1.thumb")
    # A wildcard's challenge shares the record name with its base name.
    second = dns_challenge(order, "*.www.example.test", solver_config, "k2.thumb")
    fqdn = "_acme-challenge.www.example.test."
    assert txt_record_name(second.dns_name) == fqdn
    solver = solver_for(first)
    assert isinstance(solver, Rfc2136Solver)

    solver.present(first)
    solver.present(first)  # idempotent: still one value
    assert bind.txt(fqdn) == [dns01_txt_value("k1.thumb")]
    assert solver.self_check(first) is None
    failure = solver.self_check(second)
    assert failure is not None and "not yet propagated" in failure

    solver_for(second).present(second)
    assert bind.txt(fqdn) == sorted([dns01_txt_value("k1.thumb"), dns01_txt_value("k2.thumb")])
    assert solver.self_check(second) is None

    solver.cleanup(first)
    assert bind.txt(fqdn) == [dns01_txt_value("k2.thumb")]
    solver.cleanup(first)  # deleting a missing value is a no-op
    solver_for(second).cleanup(second)
    assert bind.txt(fqdn) == []


def test_second_zone_and_authoritative_lookup(
    bind: Bind9Server, order: Order, settings: Settings
) -> None:
    """Without SELF_CHECK_NAMESERVERS the check asks the zone's own nameservers (SOA → NS)."""
    settings.SELF_CHECK_NAMESERVERS = []
    chal = dns_challenge(order, "api.example.org", rfc2136_solver_config(bind), "k3.thumb")
    fqdn = txt_record_name(chal.dns_name)
    res = dns.resolver.Resolver(configure=False)
    res.nameservers = [dns.nameserver.Do53Nameserver(bind.host, bind.port)]
    # ns.example.org is 127.0.0.1 in the zone; BIND listens on its own port there.
    assert authoritative_nameservers(fqdn, res, bind.port) == [("127.0.0.1", bind.port)]
    value = dns01_txt_value("k3.thumb")
    missing = check_dns01(fqdn, value, res=res, authoritative_port=bind.port)
    assert missing is not None and "no TXT records" in missing
    solver = solver_for(chal)
    solver.present(chal)
    try:
        assert check_dns01(fqdn, value, res=res, authoritative_port=bind.port) is None
    finally:
        solver.cleanup(chal)
    assert bind.txt(fqdn) == []


def test_wrong_tsig_secret_is_a_temporary_error(bind: Bind9Server, order: Order) -> None:
    solver_config = rfc2136_solver_config(bind)
    solver_config["dns01"]["rfc2136"]["tsigSecretSecretRef"]["name"] = "wrong"
    with transaction.atomic():
        store(SecretWrite(name="wrong", path="t", type=OPAQUE, data={"secret": "d3JvbmcK" * 4}))
    chal = dns_challenge(order, "bad.example.test", solver_config, "k4.thumb")
    with pytest.raises(
        TemporaryError, match=r"rfc2136: add TXT _acme-challenge\.bad\.example\.test"
    ):
        solver_for(chal).present(chal)
    assert bind.txt("_acme-challenge.bad.example.test") == []


def test_name_outside_the_servers_zones_is_a_temporary_error(
    bind: Bind9Server, order: Order
) -> None:
    chal = dns_challenge(order, "www.other.test", rfc2136_solver_config(bind), "k5.thumb")
    with pytest.raises(TemporaryError, match="rfc2136"):
        solver_for(chal).present(chal)


def test_rfc2136_config_errors() -> None:
    with pytest.raises(SolverConfigError, match="tsigAlgorithm"):
        load_config({"nameserver": "127.0.0.1", "tsigKeyName": "k", "tsigAlgorithm": "HMACFOO"})
    with pytest.raises(SolverConfigError, match="nameserver"):
        load_config({"nameserver": ""})
    with pytest.raises(TemporaryError, match="not found"):
        load_config(
            {
                "nameserver": "127.0.0.1:5353",
                "tsigKeyName": "k",
                "tsigSecretSecretRef": {"name": "absent", "key": "secret"},
            }
        )
    cfg = load_config({"nameserver": "[::1]:5353"})
    assert (cfg.host, cfg.port, cfg.key) == ("::1", 5353, None)
    assert parse_hostport("ns.example.test") == ("ns.example.test", 53)


def test_webhook_provider_end_to_end(bind: Bind9Server, order: Order, settings: Settings) -> None:
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    provider = start_webhook_provider(bind)
    try:
        chal = dns_challenge(
            order, "hook.example.test", {"dns01": {"webhook": {"url": provider.url}}}, "k6.t"
        )
        solver = solver_for(chal)
        assert isinstance(solver, WebhookSolver)
        solver.present(chal)
        assert bind.txt("_acme-challenge.hook.example.test") == [dns01_txt_value("k6.t")]
        assert solver.self_check(chal) is None
        solver.cleanup(chal)
        assert bind.txt("_acme-challenge.hook.example.test") == []
        assert provider.calls[0] == {
            "action": "present",
            "dnsName": "hook.example.test",
            "fqdn": "_acme-challenge.hook.example.test.",
            "value": dns01_txt_value("k6.t"),
        }
        assert [c["action"] for c in provider.calls] == ["present", "cleanup"]
    finally:
        provider.stop()


def test_webhook_non_2xx_is_a_temporary_error(bind: Bind9Server, order: Order) -> None:
    provider = start_webhook_provider(bind, fail_with=503)
    try:
        chal = dns_challenge(
            order, "down.example.test", {"dns01": {"webhook": {"url": provider.url}}}, "k7.t"
        )
        with pytest.raises(TemporaryError, match="answered HTTP 503"):
            solver_for(chal).present(chal)
    finally:
        provider.stop()
    with pytest.raises(SolverConfigError):
        WebhookSolver({"url": "ftp://nope"})


def test_controller_presents_then_cleans_up_after_finishing(
    bind: Bind9Server, order: Order, settings: Settings
) -> None:
    """present → presented; failing self-check shows why; finish → cleanup removes the TXT."""
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    chal = dns_challenge(
        order,
        "ctl.example.test",
        rfc2136_solver_config(bind),
        "k8.thumb",
        processing=True,
        state="pending",
    )
    fqdn = "_acme-challenge.ctl.example.test"
    controller.reconcile(chal)
    chal.refresh_from_db()
    assert chal.presented and chal.presented_at is not None
    assert bind.txt(fqdn) == [dns01_txt_value("k8.thumb")]
    assert Event.objects.filter(name=chal.name, reason="Presented").exists()

    # Finished (e.g. by the scheduler's timeout): the next look removes the record only.
    Challenge.objects.filter(pk=chal.pk).update(
        finished=True, processing=False, state="errored", reason="timed out"
    )
    chal.refresh_from_db()
    assert controller.reconcile(chal).requeue_after is None
    chal.refresh_from_db()
    assert not chal.presented
    assert chal.state == "errored" and chal.reason == "timed out"
    assert bind.txt(fqdn) == []
    assert Event.objects.filter(name=chal.name, reason="CleanedUp").exists()


def test_controller_present_failure_is_visible(bind: Bind9Server, order: Order) -> None:
    solver_config = {"dns01": {"webhook": {"url": "http://127.0.0.1:9/unreachable"}}}
    chal = dns_challenge(
        order, "fail.example.test", solver_config, "k9.t", processing=True, state="pending"
    )
    with pytest.raises(TemporaryError):
        controller.reconcile(chal)
    chal.refresh_from_db()
    assert chal.reason.startswith("presenting failed: webhook present at http://127.0.0.1:9")
    assert not chal.presented


def test_unusable_solver_config_fails_the_challenge(order: Order) -> None:
    chal = make_challenge(
        order, "cfg.example.test", "dns-01", solver={"dns01": {}}, processing=True, state="pending"
    )
    controller.reconcile(chal)
    chal.refresh_from_db()
    assert chal.finished and not chal.processing
    assert chal.state == "errored"
    assert "rfc2136, webhook" in chal.reason
    order.refresh_from_db()
    assert order.due_at is not None


def test_self_check_resolver_uses_configured_nameservers(
    bind: Bind9Server, settings: Settings
) -> None:
    from issuance.acme.solvers.selfcheck import resolve_addresses

    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    # Only BIND knows these names (wildcard A record); the system resolver does not.
    assert resolve_addresses("anything.example.test") == ["127.0.0.1"]
    assert resolve_addresses("example.org") == ["127.0.0.1"]
    with pytest.raises(dns.resolver.NoNameservers):
        resolve_addresses("www.not-served.test")  # BIND refuses names outside its zones


def test_challenge_of_a_failed_order_stops_and_cleans_up(
    bind: Bind9Server, order: Order, settings: Settings
) -> None:
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    chal = dns_challenge(
        order,
        "orphan.example.test",
        rfc2136_solver_config(bind),
        "k10.thumb",
        processing=True,
        state="pending",
    )
    controller.reconcile(chal)  # presents
    assert bind.txt("_acme-challenge.orphan.example.test") == [dns01_txt_value("k10.thumb")]
    type(order).objects.filter(pk=order.pk).update(state="invalid", reason="other name failed")
    chal.refresh_from_db()
    assert controller.reconcile(chal).requeue_after is not None  # finished; cleanup next
    chal.refresh_from_db()
    assert (chal.state, chal.reason, chal.finished, chal.processing) == (
        "errored",
        "the order is invalid",
        True,
        False,
    )
    controller.reconcile(chal)
    assert bind.txt("_acme-challenge.orphan.example.test") == []
