"""CA fallback end to end: two real Pebbles (each its own roots), the first one down.

The first CA sits behind a TCP forwarder (tests/e2e/tcpproxy.py) that closes its port: a
stopped CA's host refuses connections at once, and Pebble behind it keeps its accounts for
when it comes back (a killed Pebble would forget them). Everything else is the defaults:
the worker in this process (`drive`), the app answering HTTP-01 for both CAs.

What the issue asks: with the first server down the certificate is issued by the second
(its chain verifies against the second Pebble's roots, not the first's), and the Order,
the timeline, the API and the certificate page say so; once the first is back, the next
renewal is issued by the first again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from issuance.acme import health
from issuance.acme.fallback import forget_clients
from issuance.models import Certificate, CertificateRequest, Event, Issuer, Order, Secret
from issuance.operations import actions
from tests.e2e.background import ECDSA, make_viewer, outage_record
from tests.e2e.conftest import AcmeStack
from tests.e2e.servers import start_pebble, verify_chain
from tests.e2e.tcpproxy import TcpProxy
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def newest_order(name: str) -> Order:
    request = CertificateRequest.objects.filter(certificate__name=name).latest("revision")
    return Order.objects.get(request=request)


def verifies(chain: str, roots: list[str]) -> bool:
    try:
        verify_chain(chain, roots)
    except Exception:
        return False
    return True


def test_first_ca_down_second_issues_and_renewal_returns_to_the_first(
    acme_stack: Callable[..., AcmeStack], drive: Any
) -> None:
    stack = acme_stack()
    second = start_pebble(
        stack.workdir,
        http_port=stack.http_port,
        dns_server=stack.dns.dns_address,
        name="pebble-fallback",
    )
    proxy = TcpProxy(("127.0.0.1", stack.pebble.port))
    try:
        first_url = f"https://127.0.0.1:{proxy.port}/dir"
        issuer = stack.make_issuer(
            server=first_url,
            fallback=[{"server": second.directory_url, "caBundle": second.ca_bundle_b64}],
        )
        drive(lambda: Issuer.objects.get(pk=issuer.pk).is_ready, timeout=30)

        proxy.down()
        cert = make_certificate("web", issuer, dnsNames=["web.example.test"], privateKey=ECDSA)
        drive(lambda: Certificate.objects.get(pk=cert.pk).condition_is("Ready"), timeout=90)

        order = newest_order("web")
        assert (order.server, order.server_index) == (second.directory_url, 1)
        assert order.url.startswith(f"https://127.0.0.1:{second.port}/")
        chain = Secret.objects.get(name=cert.secret_name).tls_crt
        assert verifies(chain, second.roots())
        assert not verifies(chain, stack.pebble.roots())
        timeline = list(
            Event.objects.filter(certificate_name="web").values_list("message", flat=True)
        )
        assert any(f"Issued by {second.directory_url} (fallback 1)" in m for m in timeline)
        assert any(
            m.startswith(f"Ordering from {second.directory_url} (fallback 1)") for m in timeline
        )
        assert outage_record(first_url) is not None, "the refused connection was recorded"

        web = Client()
        web.force_login(make_viewer())
        status = web.get("/api/v1/certificates/web/").json()["status"]
        assert status["issuedBy"] == {
            "server": second.directory_url,
            "fallback": 1,
            "order": order.name,
        }
        page = web.get("/certificates/web/").content.decode()
        assert f"issued by {second.directory_url} (fallback 1)" in page

        # The first CA comes back; the issuer's probe finds it (2.5 s, then 5, 10, 20 s).
        proxy.up()
        drive(lambda: outage_record(first_url) is None, timeout=60)
        health.forget()
        actions.force_renew(Certificate.objects.get(pk=cert.pk), "tester")
        drive(lambda: Certificate.objects.get(pk=cert.pk).revision == 2, timeout=90)

        renewal = newest_order("web")
        assert renewal.pk != order.pk
        assert (renewal.server, renewal.server_index) == (first_url, 0)
        chain = Secret.objects.get(name=cert.secret_name).tls_crt
        assert verifies(chain, stack.pebble.roots())
        status = web.get("/api/v1/certificates/web/").json()["status"]
        assert status["issuedBy"]["fallback"] == 0
        assert status["issuedBy"]["server"] == first_url
    finally:
        proxy.stop()
        second.stop()
        forget_clients()
