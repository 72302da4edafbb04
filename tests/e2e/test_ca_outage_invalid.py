"""A CA that fails a validation because of its own outage costs no failure backoff.

What an operator met: Pebble was frozen (SIGSTOP) for minutes while it validated an HTTP-01
challenge; on SIGCONT its own clock had run past the validation's deadline, so it marked the
challenge invalid (`urn:ietf:params:acme:error:connection ... context deadline exceeded`)
and the order with it. The certificate went into the 1 h backoff for the CA's outage.

Here the validation is certainly in flight when the CA freezes: Pebble validates HTTP-01
through a forwarder that holds its connections (the app's answer never reaches it), and the
CA is frozen once it has connected. After the outage the order starts a new ACME order
(order_retry.py) and the certificate is issued with no failure recorded.

The control: the same held validation with no outage of the CA is a real failure (the CA
cannot reach the app) and does fail the order into the backoff.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pytest_django import Settings

from issuance.models import Certificate, Challenge, ChallengeState, Event, Order
from issuance.worker.wakeup import notify_workers
from tests.e2e.background import ECDSA, all_ready, outage_record, running_worker, warm_up
from tests.e2e.conftest import AcmeStack
from tests.e2e.servers import DjangoThreadServer, free_port
from tests.e2e.tcpproxy import TcpProxy
from tests.factories import make_certificate
from tests.helpers import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(400)]

OUTAGE = 60.0  # seconds the CA stays frozen, as in the frozen-CA test
READY_WITHIN = 60.0  # seconds from the CA's return
CERTIFICATES = 3


class HeldValidation:
    """Pebble's HTTP-01 port is a forwarder to the app; the self-check reaches the app
    directly, so the challenge is accepted while the CA's fetch can be held."""

    def __init__(self, stack: AcmeStack, settings: Settings) -> None:
        self.app = DjangoThreadServer(free_port())
        settings.HTTP01_SELF_CHECK_PORT = self.app.port
        self.proxy = TcpProxy(("127.0.0.1", self.app.port), port=stack.http_port)

    def stop(self) -> None:
        self.proxy.stop()
        self.app.stop()


@pytest.fixture
def held(
    acme_stack: Callable[..., AcmeStack], settings: Settings
) -> Iterator[tuple[AcmeStack, Any]]:
    stack = acme_stack(serve_http01=False)
    validation = HeldValidation(stack, settings)
    try:
        yield stack, validation
    finally:
        validation.stop()


def start_held_certificates(stack: AcmeStack, validation: HeldValidation, prefix: str) -> list[str]:
    """Certificates whose HTTP-01 validations are all in flight at the CA, held."""
    validation.proxy.hold()
    names = [f"{prefix}-{i}" for i in range(CERTIFICATES)]
    for name in names:
        make_certificate(
            name, stack.issuers[0], dnsNames=[f"{name}.example.test"], privateKey=ECDSA
        )
    notify_workers()
    wait_for(
        lambda: (
            Challenge.objects.filter(
                order__request__certificate__name__in=names, state=ChallengeState.PROCESSING
            ).count()
            == len(names)
            # Pebble opens more than one connection per validation.
            and len(validation.proxy.held) >= len(names)
        ),
        60,
        "every challenge accepted and its validation held at the CA",
        poll=0.05,
    )
    return names


def test_validation_failed_by_a_frozen_ca_is_retried_without_backoff(
    held: tuple[AcmeStack, HeldValidation],
) -> None:
    stack, validation = held
    issuer = stack.make_issuer()
    pid = stack.pebble.process.popen.pid
    with running_worker():
        warm_up(issuer, "frozen-warm")
        names = start_held_certificates(stack, validation, "frozen")
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(lambda: outage_record(stack.pebble.directory_url), 45, "CA unreachable")
            time.sleep(OUTAGE)
            validation.proxy.release()
        finally:
            os.kill(pid, signal.SIGCONT)
        back = time.monotonic()
        wait_for(lambda: all_ready(names), READY_WITHIN + 60, "every certificate Ready", poll=0.2)
        ready_after = time.monotonic() - back
    print(f"\nfrozen CA, held validations: all Ready {ready_after:.1f} s after the CA returned")

    certs = Certificate.objects.filter(name__in=names)
    assert all(not c.failed_issuance_attempts for c in certs)
    assert all(c.next_retry_time is None and c.last_failure_time is None for c in certs)
    orders = list(Order.objects.filter(request__certificate__name__in=names))
    assert len(orders) == len(names), "one Order per request"
    for order in orders:
        assert order.state == "valid"
        assert order.failure_time is None
        assert len(order.restarts) == 1, order.restarts
        restart = order.restarts[0]
        assert restart["state"] == "invalid"
        assert "urn:ietf:params:acme:error:connection" in restart["reason"]
        assert restart["url"] and restart["url"] != order.url
        assert "unreachable" in restart["outage"]
    restarted = Event.objects.filter(kind="Order", reason="OrderRestarted")
    assert restarted.count() == len(names)
    assert ready_after <= READY_WITHIN


def test_held_validation_without_a_ca_outage_fails_into_backoff(
    held: tuple[AcmeStack, HeldValidation],
) -> None:
    stack, validation = held
    issuer = stack.make_issuer()
    with running_worker():
        warm_up(issuer, "plain-warm")
        names = start_held_certificates(stack, validation, "plain")
        wait_for(
            lambda: (
                Certificate.objects.filter(name__in=names, next_retry_time__isnull=False).count()
                == len(names)
            ),
            240,
            "every certificate in the failure backoff",
            poll=0.5,
        )
    assert outage_record(stack.pebble.directory_url) is None
    for order in Order.objects.filter(request__certificate__name__in=names):
        assert order.state == "invalid"
        assert order.restarts == []
        assert "urn:ietf:params:acme:error:connection" in order.reason
    assert not Event.objects.filter(reason="OrderRestarted").exists()
