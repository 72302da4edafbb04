"""ACME against Pebble when things go wrong: a paused CA, a worker process killed by SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from issuance.acme import ratelimit
from issuance.acme.accounts import client_for
from issuance.models import Certificate, Event, Issuer, Order
from issuance.worker.wakeup import wake
from tests.e2e.conftest import AcmeStack, Drive
from tests.e2e.servers import manage_py, verify_chain
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}


def test_paused_ca_gets_no_calls_until_the_pause_ends(
    acme_stack: Callable[..., AcmeStack], drive: Drive
) -> None:
    stack = acme_stack()
    issuer = stack.make_issuer()
    drive(lambda: Issuer.objects.get(pk=issuer.pk).is_ready, timeout=30)
    issuer.refresh_from_db()
    client = client_for(issuer)
    until = ratelimit.record_pause(
        stack.pebble.directory_url, timedelta(minutes=2), "urn:ietf:params:acme:error:rateLimited"
    )
    make_certificate("paused", issuer, dnsNames=["paused.example.test"], privateKey=ECDSA)
    drive(lambda: Order.objects.filter(request__certificate__name="paused").exists(), 30)
    drive(lambda: "paused" in Order.objects.get(request__certificate__name="paused").last_error)
    order = Order.objects.get(request__certificate__name="paused")
    # Not even attempted: the pause was checked before any request.
    assert order.url == ""
    assert order.create_attempted_at is None
    assert order.due_at is not None
    assert abs((order.due_at - until).total_seconds()) < 5, "retry at the end of the pause"
    # Every issuer of that CA is paused, and nothing reached Pebble meanwhile.
    ratelimit.clear_pause(stack.pebble.directory_url)
    assert client.list_orders() == []

    wake(order)
    drive(lambda: Certificate.objects.get(name="paused").condition_is("Ready"), timeout=90)
    assert len(client.list_orders()) == 1
    order.refresh_from_db()
    verify_chain(order.certificate_pem, stack.pebble.roots())


@pytest.mark.postgres
def test_worker_process_sigkilled_after_new_order_finishes_without_a_second_order(
    acme_stack: Callable[..., AcmeStack],
) -> None:
    """A real `manage.py reconcile` dies by SIGKILL right after the CA answered newOrder."""
    stack = acme_stack()
    issuer = stack.make_issuer()
    db = connection.settings_dict
    env = {
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "KEY_ENCRYPTION_KEY": django_settings.KEY_ENCRYPTION_KEY,
        "SECRET_KEY": "e2e-secret",
        "SELF_CHECK_NAMESERVERS": stack.dns.dns_address,
        "HTTP01_SELF_CHECK_PORT": str(stack.http_port),
        "WORKER_THREADS": "2",
    }
    make_certificate("killed", issuer, dnsNames=["killed.example.test"], privateKey=ECDSA)
    crashing = manage_py(
        stack.workdir,
        ["reconcile", "--worker-id", "crashing"],
        {**env, "ISSUANCE_CRASH_AT": "order-after-new-order", "ISSUANCE_CRASH_MODE": "kill"},
        name="worker-crash",
    )
    try:
        assert crashing.popen.wait(60) == -9, crashing.log()
    finally:
        crashing.stop()
    killed = time.monotonic()
    order = Order.objects.get(request__certificate__name="killed")
    assert order.url == ""
    assert order.create_attempted_at is not None
    issuer.refresh_from_db()
    client = client_for(issuer)
    assert len(client.list_orders()) == 1

    # Restarted at once, with the default lease: the dead worker's order is taken over
    # within 30 s of its death.
    worker = manage_py(stack.workdir, ["reconcile"], env, name="worker")
    resumed: float | None = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if resumed is None and not Order.objects.filter(lease_owner="crashing").exists():
                resumed = time.monotonic() - killed
            if Certificate.objects.get(name="killed").condition_is("Ready"):
                break
            assert worker.alive(), worker.log()
            time.sleep(0.2)
        else:
            raise AssertionError("not Ready after the restart:\n" + worker.log()[-3000:])
    finally:
        worker.stop()
    assert resumed is not None and resumed <= 30, resumed
    order.refresh_from_db()
    assert client.list_orders() == [order.url]
    assert Event.objects.filter(kind="Order", name=order.name, reason="OrderRecovered").exists()
    verify_chain(order.certificate_pem, stack.pebble.roots())
    assert order.failure_time is None
    assert timezone.now() - order.created_at < timedelta(minutes=5)
