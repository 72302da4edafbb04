"""Probes of real servers: Python `ssl` servers serving the current revision, an older one,
a certificate from elsewhere, an expired, a wrong-host and a self-signed one; aiosmtpd with
and without STARTTLS; a closed port and a port that never answers. Each probe's record
says which revision is served and why a chain or a name does not check out."""

from __future__ import annotations

import time

import pytest

from issuance.models import Endpoint, Event, Secret
from issuance.pki.x509 import split_pem_chain
from issuance.probing import runner
from issuance.probing.handshake import PROBE_TIMEOUT
from tests.probing.conftest import Issued, self_signed, signed_by_ca
from tests.probing.servers import (
    black_hole,
    closed_port,
    smtp_starttls_server,
    smtp_without_starttls,
    starttls_line_server,
    tls_server,
)

pytestmark = pytest.mark.django_db


def test_current_revision_is_recognised(issued: Issued) -> None:
    pair = issued.revisions[2]
    with tls_server(pair.chain, pair.key) as port:
        endpoint = issued.endpoint(port)
        record = runner.probe_endpoint(endpoint.pk)
    assert record is not None
    assert record["match"] == "current"
    assert record["revision"] == 2
    assert record["chainVerified"] is True, record["chainError"]
    assert record["hostnameMatch"] is True
    assert record["tlsVersion"].startswith("TLSv1.")
    assert record["fingerprintSha256"] and len(record["fingerprintSha256"]) == 64
    assert record["chain"][0].startswith("-----BEGIN CERTIFICATE-----")
    endpoint.refresh_from_db()
    assert (endpoint.match, endpoint.served_revision) == ("current", 2)
    assert endpoint.probed_at is not None
    assert endpoint.next_probe_at > endpoint.probed_at
    assert Event.objects.filter(
        certificate_name="web", reason="EndpointChanged", message__contains="now serves revision 2"
    ).exists()


def test_previous_revision_is_one_behind(issued: Issued) -> None:
    pair = issued.revisions[1]
    with tls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert (record["match"], record["revision"], record["behind"]) == ("previous", 1, 1)
    assert record["chainVerified"] is True


def test_foreign_certificate_from_the_same_ca(issued: Issued) -> None:
    pair = signed_by_ca(issued.issuer, ["web.example.test"])
    with tls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert record["match"] == "foreign"
    assert record["revision"] is None
    assert record["chainVerified"] is True  # the CA is right; the certificate is not ours
    assert record["hostnameMatch"] is True
    assert Event.objects.filter(
        certificate_name="web", type=Event.WARNING, message__contains="never had"
    ).exists()


def test_expired_certificate(issued: Issued) -> None:
    pair = signed_by_ca(issued.issuer, ["web.example.test"], days=10, start_days_ago=20)
    with tls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert record["expired"] is True
    assert record["chainVerified"] is False
    assert "expired" in record["chainError"]


def test_wrong_host(issued: Issued) -> None:
    pair = signed_by_ca(issued.issuer, ["other.example.test"])
    with tls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert record["hostnameMatch"] is False
    assert record["chainVerified"] is True


def test_self_signed(issued: Issued) -> None:
    pair = self_signed(["web.example.test"])
    with tls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert record["match"] == "foreign"
    assert record["chainVerified"] is False
    assert "does not lead to the CA of issuer ca" in record["chainError"]


def test_smtp_starttls(issued: Issued) -> None:
    pair = issued.revisions[2]
    with smtp_starttls_server(pair.chain, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port, protocol="smtp").pk)
    assert record is not None
    assert (record["match"], record["revision"]) == ("current", 2), record["error"]


def test_smtp_without_starttls_is_refused(issued: Issued) -> None:
    with smtp_without_starttls() as port:
        record = runner.probe_endpoint(issued.endpoint(port, protocol="smtp").pk)
    assert record is not None
    assert (record["match"], record["errorKind"]) == ("error", "starttls")
    assert "STARTTLS refused" in record["error"]


def test_closed_port_is_refused(issued: Issued) -> None:
    record = runner.probe_endpoint(issued.endpoint(closed_port()).pk)
    assert record is not None
    assert (record["match"], record["errorKind"]) == ("error", "refused")
    endpoint = Endpoint.objects.get(certificate=issued.cert)
    assert endpoint.match == "error"
    assert Event.objects.filter(reason="EndpointUnreachable", type=Event.WARNING).exists()


def test_black_hole_times_out_after_the_probe_timeout(issued: Issued) -> None:
    with black_hole() as port:
        started = time.monotonic()
        record = runner.probe_endpoint(issued.endpoint(port).pk)
        took = time.monotonic() - started
    assert record is not None
    assert (record["match"], record["errorKind"]) == ("error", "timeout")
    assert PROBE_TIMEOUT - 0.5 <= took < PROBE_TIMEOUT + 3


def test_a_change_is_recorded_once(issued: Issued) -> None:
    """The timeline says when what is served changes, not at every probe."""
    pair = issued.revisions[1]
    with tls_server(pair.chain, pair.key) as port:
        endpoint = issued.endpoint(port)
        runner.probe_endpoint(endpoint.pk)
        runner.probe_endpoint(endpoint.pk)
    assert Event.objects.filter(reason="EndpointChanged").count() == 1


@pytest.mark.parametrize("protocol", ["imap", "pop3"])
def test_imap_and_pop3_starttls(issued: Issued, protocol: str) -> None:
    pair = issued.revisions[2]
    with starttls_line_server(pair.chain, pair.key, protocol) as port:
        record = runner.probe_endpoint(issued.endpoint(port, protocol=protocol).pk)
    assert record is not None
    assert (record["match"], record["revision"]) == ("current", 2), record["error"]


@pytest.mark.parametrize("protocol", ["imap", "pop3"])
def test_imap_and_pop3_starttls_refused(issued: Issued, protocol: str) -> None:
    pair = issued.revisions[2]
    with starttls_line_server(pair.chain, pair.key, protocol, offer=False) as port:
        record = runner.probe_endpoint(issued.endpoint(port, protocol=protocol).pk)
    assert record is not None
    assert (record["match"], record["errorKind"]) == ("error", "starttls")
    assert "refused" in record["error"]


def test_the_whole_served_chain_is_read(issued: Issued) -> None:
    """Leaf and CA as served: the chain is read whole (Python before 3.13 has it only on
    the private `_sslobj`; without it the probe would see the leaf alone)."""
    pair = issued.revisions[2]
    ca = Secret.objects.get(name="test-ca").tls_crt
    leaf = split_pem_chain(pair.chain)[0]
    with tls_server(leaf + ca, pair.key) as port:
        record = runner.probe_endpoint(issued.endpoint(port).pk)
    assert record is not None
    assert len(record["chain"]) == 2
    assert record["chain"][1].strip() == ca.strip()
    assert record["chainVerified"] is True
