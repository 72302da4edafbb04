"""Certificate controller steps: trigger, key manager, request manager, issuing, readiness."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.controllers import certificates
from issuance.controllers.base import TemporaryError
from issuance.models import (
    Certificate,
    CertificateRequest,
    CertificateState,
    Event,
    RequestState,
    Secret,
)
from issuance.operations import actions
from issuance.pki.x509 import cert_info
from issuance.shapes import PrivateKeySpec
from tests.controllers.helpers import (
    approve_latest,
    change_spec,
    csr_key_der,
    deny_latest,
    key_der,
    latest_request,
    manual_issuer,
    move_failure_back,
    requests_of,
    step,
)
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer
from tests.helpers import drain

pytestmark = pytest.mark.django_db
EC: PrivateKeySpec = {"algorithm": "ECDSA", "size": 256}


def issued_key(cert: Certificate) -> bytes:
    return cert_info(Secret.objects.get(name=cert.secret_name).tls_crt).public_key_der


class TestSteps:
    def test_first_pass_starts_the_issuance(self) -> None:
        cert = make_certificate("steps", make_selfsigned_issuer(), privateKey=EC)
        # trigger, key manager and request manager in one pass: one write of the row, then
        # the request made from the stored key; nothing left to do until the request ends
        assert step(cert).requeue_after is None
        cert.refresh_from_db()
        issuing = cert.get_condition("Issuing")
        assert issuing and issuing["status"] == "True" and issuing["reason"] == "DoesNotExist"
        assert cert.state == CertificateState.ISSUING
        ready = cert.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "DoesNotExist"
        assert cert.next_private_key
        request = latest_request(cert)
        assert request.revision == 1 and request.name == "steps-1"
        assert csr_key_der(request) == key_der(cert.next_private_key)
        assert request.spec["issuerRef"]["name"] == "selfsigned"
        assert request.spec["duration"] == "2160h"
        assert request.source == "certificate"
        reasons = list(
            Event.objects.filter(certificate_name="steps", kind="Certificate")
            .order_by("pk")
            .values_list("reason", flat=True)
        )
        assert reasons == ["Issuing", "Generated", "Requested"]
        # waiting on the request: no second one, the key is kept
        stored = cert.next_private_key_ciphertext
        assert step(cert).requeue_after is None
        cert.refresh_from_db()
        assert CertificateRequest.objects.count() == 1
        assert cert.next_private_key_ciphertext == stored

    def test_key_stored_by_someone_else_meanwhile_is_kept(self) -> None:
        cert = make_certificate("race", make_selfsigned_issuer(), privateKey=EC)
        cert.refresh_from_db()
        # another worker (an expired lease) stored a key after this pass read the row
        theirs = make_certificate("other-key", make_selfsigned_issuer("ss2"), privateKey=EC)
        step(theirs)
        theirs.refresh_from_db()
        Certificate.objects.filter(pk=cert.pk).update(
            next_private_key_ciphertext=theirs.next_private_key_ciphertext
        )
        with pytest.raises(TemporaryError, match="changed meanwhile"):
            certificates.reconcile(cert)
        assert CertificateRequest.objects.filter(certificate=cert).count() == 0
        # the next pass makes the request with their key
        step(cert)
        cert.refresh_from_db()
        assert cert.next_private_key_ciphertext == theirs.next_private_key_ciphertext
        assert csr_key_der(latest_request(cert)) == key_der(cert.next_private_key)

    def test_request_name_truncated_for_long_names(self) -> None:
        name = "a" * 252
        cert = make_certificate(
            name, make_selfsigned_issuer(), privateKey=EC, secretName="long-tls"
        )
        drain()
        request = latest_request(cert)
        assert len(request.name) <= 253 and request.name.endswith("-1")
        cert.refresh_from_db()
        assert cert.state == CertificateState.READY

    def test_request_name_taken_by_external_request(self) -> None:
        issuer = make_selfsigned_issuer()
        cert = make_certificate("taken", issuer, privateKey=EC)
        other = make_certificate("other", issuer, privateKey=EC)
        step(other), step(other), step(other)
        # a request called "taken-1" that belongs to someone else
        req = latest_request(other)
        CertificateRequest.objects.create(
            name="taken-1", spec=req.spec, issuer=issuer, source="api"
        )
        drain()
        cert.refresh_from_db()
        assert cert.state == CertificateState.READY
        own = latest_request(cert)
        assert own.revision == 1 and own.name != "taken-1"


class TestKeys:
    def test_rotation_always_generates_new_key(self) -> None:
        cert = make_certificate("always", make_selfsigned_issuer(), privateKey=EC)
        drain()
        first = issued_key(cert)
        actions.force_renew(cert, "bob")
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        assert issued_key(cert) != first

    def test_rotation_never_reuses_key(self) -> None:
        spec = {**EC, "rotationPolicy": "Never"}
        cert = make_certificate("never", make_selfsigned_issuer(), privateKey=spec)
        drain()
        first = issued_key(cert)
        actions.force_renew(cert, "bob")
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        assert issued_key(cert) == first
        assert Event.objects.filter(certificate_name="never", reason="Reused").exists()

    def test_rotation_never_new_key_when_spec_changes(self) -> None:
        spec = {**EC, "rotationPolicy": "Never"}
        cert = make_certificate("never2", make_selfsigned_issuer(), privateKey=spec)
        drain()
        first = issued_key(cert)
        change_spec(cert, privateKey={"algorithm": "ECDSA", "size": 384, "rotationPolicy": "Never"})
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        info = cert_info(Secret.objects.get(name="never2-tls").tls_crt)
        assert info.key_size == 384 and info.public_key_der != first

    def test_existing_next_key_is_never_replaced(self) -> None:
        cert = make_certificate("keep", make_selfsigned_issuer(), privateKey=EC)
        step(cert), step(cert)
        cert.refresh_from_db()
        stored = cert.next_private_key_ciphertext
        assert stored
        for _ in range(3):
            step(cert)
        cert.refresh_from_db()
        assert cert.next_private_key_ciphertext == stored

    def test_rsa_and_ed25519(self) -> None:
        issuer = make_selfsigned_issuer()
        rsa = make_certificate("rsa", issuer, privateKey={"algorithm": "RSA", "size": 2048})
        ed = make_certificate("ed", issuer, privateKey={"algorithm": "Ed25519"})
        drain()
        assert cert_info(Secret.objects.get(name="rsa-tls").tls_crt).key_algorithm == "RSA"
        assert cert_info(Secret.objects.get(name="ed-tls").tls_crt).key_algorithm == "Ed25519"
        for c in (rsa, ed):
            c.refresh_from_db()
            assert c.state == CertificateState.READY


class TestFailures:
    def test_denied_counts_as_failure_with_backoff(self) -> None:
        cert = make_certificate("denied", manual_issuer(), privateKey=EC)
        drain()
        request = latest_request(cert)
        assert request.state == RequestState.PENDING
        ready = request.get_condition("Ready")
        assert ready and ready["reason"] == "Pending"
        cert.refresh_from_db()
        key_before = cert.next_private_key_ciphertext
        deny_latest(cert, "no such host")
        drain()
        cert.refresh_from_db()
        assert cert.failed_issuance_attempts == 1
        assert cert.last_failure_time is not None
        assert cert.next_retry_time == cert.last_failure_time + timedelta(hours=1)
        assert cert.state == CertificateState.FAILED
        issuing = cert.get_condition("Issuing")
        assert issuing and issuing["status"] == "False" and issuing["reason"] == "Denied"
        assert "no such host" in issuing["message"] and "alice" in issuing["message"]
        # the pending key is kept for the retry
        assert cert.next_private_key_ciphertext == key_before
        assert Event.objects.filter(
            certificate_name="denied", reason="Denied", type=Event.WARNING, kind="Certificate"
        ).exists()
        # in backoff: no new request, and the worker looks again at the retry time
        result = step(cert)
        assert result.requeue_after is not None
        assert timedelta(minutes=59) < result.requeue_after <= timedelta(hours=1, seconds=1)
        assert len(requests_of(cert)) == 1

    def test_retry_after_backoff_uses_new_revision_and_same_key(self) -> None:
        cert = make_certificate("retry", manual_issuer(), privateKey=EC)
        drain()
        deny_latest(cert)
        drain()
        first = latest_request(cert)
        move_failure_back(cert, timedelta(hours=1, minutes=1))
        drain()
        reqs = requests_of(cert)
        assert [r.revision for r in reqs] == [1, 2]
        assert csr_key_der(reqs[1]) == csr_key_der(first)
        deny_latest(cert)
        drain()
        cert.refresh_from_db()
        assert cert.failed_issuance_attempts == 2
        assert cert.last_failure_time is not None
        assert cert.next_retry_time == cert.last_failure_time + timedelta(hours=2)
        move_failure_back(cert, timedelta(hours=2, minutes=1))
        drain()
        approve_latest(cert)
        drain()
        cert.refresh_from_db()
        assert cert.state == CertificateState.READY
        assert cert.revision == 3
        assert cert.failed_issuance_attempts is None
        assert cert.last_failure_time is None
        assert cert.next_retry_time is None
        assert cert.last_failure_generation is None
        assert cert.get_condition("Issuing") is None
        assert issued_key(cert) == csr_key_der(first)

    def test_force_renew_bypasses_backoff(self) -> None:
        cert = make_certificate("forced", manual_issuer(), privateKey=EC)
        drain()
        deny_latest(cert)
        drain()
        assert len(requests_of(cert)) == 1
        actions.force_renew(cert, "bob")
        drain()
        reqs = requests_of(cert)
        assert [r.revision for r in reqs] == [1, 2]
        cert.refresh_from_db()
        issuing = cert.get_condition("Issuing")
        assert issuing and issuing["status"] == "True"
        assert issuing["reason"] == "ManuallyTriggered" and "bob" in issuing["message"]
        # only a success resets the counter
        assert cert.failed_issuance_attempts == 1
        # the force was answered: a second failure backs off again (2 h)
        deny_latest(cert)
        drain()
        cert.refresh_from_db()
        assert cert.failed_issuance_attempts == 2
        assert len(requests_of(cert)) == 2

    def test_spec_change_skips_backoff(self) -> None:
        cert = make_certificate("changed", manual_issuer(), privateKey=EC)
        drain()
        deny_latest(cert)
        drain()
        change_spec(cert, dnsNames=["changed.example.test", "www.example.test"])
        drain()
        reqs = requests_of(cert)
        assert len(reqs) == 2
        from issuance.pki.csr import parse_csr

        assert sorted(parse_csr(reqs[1].csr_pem).dns_names) == [
            "changed.example.test",
            "www.example.test",
        ]

    def test_restart_in_backoff_does_not_retry_early(self) -> None:
        """A failure with no attempt count (old data) counts as one attempt: 1 h."""
        cert = make_certificate("restart", manual_issuer(), privateKey=EC)
        Certificate.objects.filter(pk=cert.pk).update(
            last_failure_time=timezone.now() - timedelta(minutes=30),
            failed_issuance_attempts=None,
        )
        result = step(cert)
        cert.refresh_from_db()
        assert requests_of(cert) == []
        assert cert.get_condition("Issuing") is None
        assert cert.last_failure_time is not None
        assert cert.next_retry_time == cert.last_failure_time + timedelta(hours=1)
        assert cert.state == CertificateState.FAILED
        assert result.requeue_after is not None
        assert timedelta(minutes=29) < result.requeue_after <= timedelta(minutes=31)
        drain()
        assert requests_of(cert) == []

    def test_force_during_inflight_issuance_makes_no_duplicate(self) -> None:
        cert = make_certificate("inflight", manual_issuer(), privateKey=EC)
        drain()
        assert len(requests_of(cert)) == 1
        actions.force_renew(cert, "bob")
        drain()
        assert len(requests_of(cert)) == 1
        approve_latest(cert)
        drain()
        cert.refresh_from_db()
        assert cert.state == CertificateState.READY and cert.revision == 1
        drain()
        assert len(requests_of(cert)) == 1


class TestTriggers:
    def test_renewal_time_reached(self) -> None:
        cert = make_certificate("renew", make_selfsigned_issuer(), privateKey=EC)
        drain()
        cert.refresh_from_db()
        # an ARI window (within the validity) that is already open moves renewal to now
        assert cert.not_before is not None
        Certificate.objects.filter(pk=cert.pk).update(
            ari_renewal_time=cert.not_before + timedelta(minutes=1), due_at=timezone.now()
        )
        step(cert)
        cert.refresh_from_db()
        issuing = cert.get_condition("Issuing")
        assert issuing and issuing["reason"] == "Renewing"
        # still Ready while renewing, as in cert-manager
        assert cert.condition_is("Ready")
        Certificate.objects.filter(pk=cert.pk).update(ari_renewal_time=None)
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2 and cert.state == CertificateState.READY

    def test_issuer_change_reissues(self) -> None:
        cert = make_certificate("moved", make_selfsigned_issuer(), privateKey=EC)
        drain()
        ca = make_ca_issuer()
        Certificate.objects.filter(pk=cert.pk).update(issuer=ca)
        change_spec(cert, issuerRef={"name": "ca", "kind": "Issuer"})
        step(cert)
        cert.refresh_from_db()
        ready = cert.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "IncorrectIssuer"
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2 and cert.state == CertificateState.READY
        info = cert_info(Secret.objects.get(name="moved-tls").tls_crt)
        assert "Test CA" in info.issuer

    def test_dns_change_reissues(self) -> None:
        cert = make_certificate("names", make_selfsigned_issuer(), privateKey=EC)
        drain()
        change_spec(cert, dnsNames=["a.example.test", "b.example.test"])
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        info = cert_info(Secret.objects.get(name="names-tls").tls_crt)
        assert sorted(info.dns_names) == ["a.example.test", "b.example.test"]

    def test_duration_change_reissues_but_equal_spelling_does_not(self) -> None:
        cert = make_certificate("dur", make_selfsigned_issuer(), privateKey=EC, duration="720h")
        drain()
        change_spec(cert, duration="720h0m0s")  # same value, other spelling
        drain()
        cert.refresh_from_db()
        assert cert.revision == 1 and cert.condition_is("Ready")
        change_spec(cert, duration="240h")
        step(cert)
        cert.refresh_from_db()
        ready = cert.get_condition("Ready")
        assert ready and ready["reason"] == "RequestChanged"
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        assert cert.not_after is not None and cert.not_before is not None
        assert cert.not_after - cert.not_before == timedelta(hours=240, minutes=5)

    def test_spec_change_while_request_pending_supersedes_it(self) -> None:
        cert = make_certificate("super", manual_issuer(), privateKey=EC)
        drain()
        change_spec(cert, dnsNames=["new.example.test"])
        drain()
        reqs = requests_of(cert)
        assert [r.revision for r in reqs] == [1, 2]
        approve_latest(cert)
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2 and cert.state == CertificateState.READY
        # approving the superseded request later changes nothing
        actions.approve(reqs[0], "alice")
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2
        info = cert_info(Secret.objects.get(name="super-tls").tls_crt)
        assert info.dns_names == ["new.example.test"]

    def test_missing_secret_reissues(self) -> None:
        cert = make_certificate("lost", make_selfsigned_issuer(), privateKey=EC)
        drain()
        Secret.objects.filter(name="lost-tls").delete()
        from issuance.worker.wakeup import wake

        wake(cert)
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2 and cert.state == CertificateState.READY

    def test_expired_certificate(self) -> None:
        issuer = manual_issuer()
        cert = make_certificate("old", issuer, privateKey=EC)
        from issuance.pki.csr import build_csr
        from issuance.pki.keys import generate_private_key, private_key_to_pem
        from issuance.pki.signing import sign_csr

        key = generate_private_key(EC)
        pem = sign_csr(
            build_csr(key, cert.spec),
            key,
            None,
            duration=timedelta(days=1),
            now=timezone.now() - timedelta(days=3),
        )
        secret = Secret(name="old-tls", tls_crt=pem, ca_crt=pem, certificate=cert)
        secret.tls_key = private_key_to_pem(key)
        secret.save()
        step(cert)
        cert.refresh_from_db()
        ready = cert.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "Expired"
        assert cert.state == CertificateState.EXPIRED
        issuing = cert.get_condition("Issuing")
        assert issuing is not None and issuing["reason"] == "Expired"


class TestHistory:
    def test_revision_history_limit(self) -> None:
        cert = make_certificate(
            "hist", make_selfsigned_issuer(), privateKey=EC, revisionHistoryLimit=2
        )
        drain()
        for _ in range(4):
            actions.force_renew(cert, "bob")
            drain()
        cert.refresh_from_db()
        assert cert.revision == 5
        assert [r.revision for r in requests_of(cert)] == [4, 5]

    def test_no_limit_keeps_everything(self) -> None:
        cert = make_certificate("all", make_selfsigned_issuer(), privateKey=EC)
        drain()
        for _ in range(3):
            actions.force_renew(cert, "bob")
            drain()
        assert [r.revision for r in requests_of(cert)] == [1, 2, 3, 4]


def test_reconcile_is_idempotent_when_ready() -> None:
    cert = make_certificate("idem", make_selfsigned_issuer(), privateKey=EC)
    drain()
    cert.refresh_from_db()
    updated = cert.updated_at
    for _ in range(3):
        certificates.reconcile(cert)
    cert.refresh_from_db()
    assert cert.updated_at == updated  # no status churn
    assert len(requests_of(cert)) == 1
