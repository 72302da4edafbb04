"""Crash at every checkpoint, restart, and the issuance completes as if nothing happened.

"Crash" = issuance.controllers.faults.SimulatedCrash (a BaseException the worker does not catch): the
lease stays on the row and only what was committed survives. "Restart" = the leases
expire and a new Worker drains the queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.controllers import faults
from issuance.models import (
    Certificate,
    CertificateRequest,
    CertificateState,
    Issuer,
    RequestState,
    Secret,
)
from issuance.operations import actions
from issuance.pki.x509 import cert_info
from issuance.worker.loop import Worker
from tests.controllers.helpers import csr_key_der, key_der, manual_issuer
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db
EC = {"algorithm": "ECDSA", "size": 256}
HAPPY_PATH = [c for c in faults.CHECKPOINTS if c != "after-failure-recorded"]


@pytest.fixture(autouse=True)
def _no_crash_left() -> Iterator[None]:
    yield
    faults.CRASH_AT = None


def expire_leases() -> None:
    past = timezone.now() - timedelta(seconds=1)
    for model in (Certificate, CertificateRequest, Issuer):
        model.objects.exclude(lease_owner="").update(lease_until=past)


def crash_at(name: str) -> None:
    """Run a worker until it dies at `name`; fail if it never gets there."""
    faults.CRASH_AT = name
    with pytest.raises(faults.SimulatedCrash):
        Worker(threads=1).run_once()
    faults.CRASH_AT = None


def restart() -> None:
    expire_leases()
    Worker(threads=1).run_once()


def issuer_for(kind: str) -> Issuer:
    return make_selfsigned_issuer() if kind == "selfSigned" else make_ca_issuer()


@pytest.mark.parametrize("kind", ["selfSigned", "ca"])
@pytest.mark.parametrize("checkpoint", HAPPY_PATH)
def test_crash_then_restart_issues_once(checkpoint: str, kind: str) -> None:
    cert = make_certificate("crashy", issuer_for(kind), privateKey=EC)
    crash_at(checkpoint)
    cert.refresh_from_db()
    key_at_crash = cert.next_private_key
    restart()
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY, (checkpoint, cert.conditions)
    requests = list(CertificateRequest.objects.filter(certificate=cert))
    assert [r.revision for r in requests] == [1]
    assert requests[0].state == RequestState.ISSUED
    issued = cert_info(Secret.objects.get(name="crashy-tls").tls_crt).public_key_der
    # the key the request was made with is the key in the certificate: nothing replaced
    assert issued == csr_key_der(requests[0])
    if key_at_crash:
        assert issued == key_der(key_at_crash)
    assert key_der(Secret.objects.get(name="crashy-tls").tls_key) == issued
    # and nothing more happens afterwards
    assert Worker(threads=1).run_once() == 0
    assert CertificateRequest.objects.count() == 1


@pytest.mark.parametrize("checkpoint", HAPPY_PATH)
def test_crash_during_renewal(checkpoint: str) -> None:
    """Same for a renewal: revision 2 exactly once, with the key stored before it."""
    cert = make_certificate("renewing", make_selfsigned_issuer(), privateKey=EC)
    Worker(threads=1).run_once()
    actions.force_renew(cert, "bob")
    crash_at(checkpoint)
    restart()
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY and cert.revision == 2, checkpoint
    revisions = list(
        CertificateRequest.objects.filter(certificate=cert)
        .order_by("revision")
        .values_list("revision", flat=True)
    )
    assert revisions == [1, 2]
    latest = CertificateRequest.objects.get(certificate=cert, revision=2)
    issued = cert_info(Secret.objects.get(name="renewing-tls").tls_crt).public_key_der
    assert issued == csr_key_der(latest)


def test_crash_after_failure_recorded_counts_once() -> None:
    cert = make_certificate("failing", manual_issuer(), privateKey=EC)
    Worker(threads=1).run_once()
    request = CertificateRequest.objects.get(certificate=cert)
    actions.deny(request, "alice", "Denied", "no")
    crash_at("after-failure-recorded")
    restart()
    cert.refresh_from_db()
    assert cert.failed_issuance_attempts == 1
    assert cert.state == CertificateState.FAILED
    assert CertificateRequest.objects.filter(certificate=cert).count() == 1
    key = cert.next_private_key
    assert key
    # the retry (forced) uses the kept key and a new revision
    actions.force_renew(cert, "bob")
    Worker(threads=1).run_once()
    retry = CertificateRequest.objects.get(certificate=cert, revision=2)
    assert csr_key_der(retry) == key_der(key)
    actions.approve(retry, "alice")
    Worker(threads=1).run_once()
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY and cert.revision == 2


def test_crash_at_every_checkpoint_in_turn() -> None:
    """One issuance that dies at each checkpoint in turn, restarting after every death."""
    cert = make_certificate("unlucky", make_ca_issuer(), privateKey=EC)
    keys = set()
    # A first issuance stores Issuing and the next key in one write, so "after-key-stored"
    # is the same moment as "after-issuing-set" there (each is crashed at on its own above).
    for checkpoint in [c for c in HAPPY_PATH if c != "after-key-stored"]:
        expire_leases()
        crash_at(checkpoint)
        cert.refresh_from_db()
        if cert.next_private_key:
            keys.add(cert.next_private_key)
    restart()
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY and cert.revision == 1
    assert len(keys) == 1  # one key from the first store to the end
    request = CertificateRequest.objects.get(certificate=cert)
    assert csr_key_der(request) == key_der(keys.pop())
