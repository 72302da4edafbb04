"""Against real Pebble: orders of an ACME issuer without an account wait once, parked, and
the account's registration wakes them at once (issuance/acme/issuer_waits.py).

Pebble requires External Account Binding and the issuer's EAB key is wrong, so Pebble
refuses the registration: the issuer has no account and rechecks in 10 minutes. The worker
runs as `serve` runs it (Worker.run in a thread, default settings).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.acme.issuer_waits import SAFETY_NET
from issuance.models import Certificate, CertificateState, Issuer, Order, Secret
from issuance.timing.backoff import error_backoff
from issuance.worker.loop import Worker
from issuance.worker.wakeup import wake
from tests.e2e.conftest import AcmeStack
from tests.e2e.servers import EAB_KEYS
from tests.factories import make_certificate
from tests.helpers import wait_for
from tests.worker.threads import run_in_thread

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}
COUNT = 6
WRONG_KEY = "c2VjcmV0LWJ1dC13cm9uZy1zZWNyZXQtYnV0LXdyb25nLXh4eA"


def _eab_secret(value: str) -> None:
    secret = Secret.objects.filter(name="pebble-eab").first() or Secret(
        name="pebble-eab", type="Opaque"
    )
    secret.tls_key = json.dumps({"secret": value})
    secret.save()


def test_registering_the_account_wakes_the_waiting_orders_at_once(
    acme_stack: Callable[..., AcmeStack],
) -> None:
    stack = acme_stack(eab_required=True)
    _eab_secret(WRONG_KEY)
    issuer = stack.make_issuer(
        "waiting",
        externalAccountBinding={
            "keyID": "kid-1",
            "keySecretRef": {"name": "pebble-eab", "key": "secret"},
        },
    )
    for i in range(COUNT):
        make_certificate(f"wait-{i}", issuer, dnsNames=[f"wait-{i}.example.test"], privateKey=ECDSA)
    orders = Order.objects.filter(issuer=issuer)

    worker = Worker()
    stop = threading.Event()
    thread = run_in_thread(worker, stop)
    try:
        # Pebble refuses the registration; each order is looked at once and parked.
        wait_for(lambda: orders.filter(error_count=1).count() == COUNT, 60, "every order waiting")
        cond = Issuer.objects.get(pk=issuer.pk).get_condition("Ready")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "ErrRegisterACMEAccount")

        # Not retried while the condition holds: past the worker's own first ACME backoff
        # (what each order used to come back after), each was still looked at only once.
        time.sleep(error_backoff(1, acme=True).total_seconds() + 1)
        now = timezone.now()
        assert list(orders.values_list("error_count", flat=True)) == [1] * COUNT
        assert orders.filter(due_at__lt=now + SAFETY_NET - timedelta(seconds=30)).count() == 0
        assert {o.last_error for o in orders} == {
            "Issuer waiting has no registered ACME account yet"
        }
        assert orders.filter(create_attempted_at__isnull=False).count() == 0

        # The condition clears: the right key, and the issuer looks again (its recheck, or an
        # operator's edit). Registering wakes the waiting orders in the same transaction.
        _eab_secret(EAB_KEYS["kid-1"])
        fixed = timezone.now()
        wake(Issuer.objects.get(pk=issuer.pk))
        wait_for(
            lambda: orders.filter(create_attempted_at__isnull=False).count() == COUNT,
            30,
            "every order at the CA",
        )
        first = min(t for t in orders.values_list("create_attempted_at", flat=True) if t)
        # Promptly: within the registration's round trip (measured 0.1-0.3 s), not the
        # waiters' 10 min safety net.
        assert first - fixed < timedelta(seconds=2)
        wait_for(
            lambda: (
                Certificate.objects.filter(issuer=issuer, state=CertificateState.READY).count()
                == COUNT
            ),
            120,
            "every certificate Ready",
        )
    finally:
        stop.set()
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
