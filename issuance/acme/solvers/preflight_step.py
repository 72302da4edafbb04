"""The DNS-01 preflight step before an ACME order is created (acme/issuer.py `sign`).

For a request without an Order yet, each DNS name whose solver is DNS-01 is preflighted
(issuance/acme/solvers/preflight.py: CNAME followed, zone found, provider read with the
credentials). A failure keeps the request pending with reason `DNSPreflightFailed` and
looks again after RETRY: no Order row, no newOrder, no ACME rate limit spent. The failure
is shown on the Certificate (condition DNSPreflight=False, reason DNSPreflightFailed, one
timeline event per distinct message) and on the Issuer (condition DNSPreflight); a later
success turns both back to True. The Issuer page's "Test DNS" runs `test_name`.

Cache: a passed (issuer, generation, solver, name) is not preflighted again for
PASSED_TTL, and a provider that answered for (issuer, generation, solver, zone) is not
asked again for the same time, so bulk issuance in one zone costs one provider call and a
few DNS queries per name every 5 minutes. The caches are per process, in memory, hold
only successes (a failure is always retried for real) and are keyed by the issuer's
generation, so a spec change starts afresh; a credentials Secret changed to a bad value
is noticed when the cached success expires (or by the challenge, which then fails to
present and retries).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from issuance.acme.solvers import preflight
from issuance.acme.solvers.preflight import PreflightResult
from issuance.acme.solvers.selection import DNS01, select_solver
from issuance.issuers.base import SignOutcome, SignState
from issuance.models import (
    Certificate,
    CertificateRequest,
    Event,
    Issuer,
    Order,
    certificate_labels_of,
)
from issuance.observability import events
from issuance.pki.csr import CSRError, parse_csr

CONDITION = "DNSPreflight"
FAILED = "DNSPreflightFailed"
PASSED = "DNSPreflightPassed"
RETRY = timedelta(minutes=2)
PASSED_TTL = 300.0  # seconds

_lock = threading.Lock()
_passed: dict[tuple[int, int, int, str], float] = {}


def forget_cache() -> None:
    with _lock:
        _passed.clear()


def _cached(key: tuple[int, int, int, str]) -> bool:
    with _lock:
        expires = _passed.get(key)
        return expires is not None and expires > time.monotonic()


def _remember(key: tuple[int, int, int, str]) -> None:
    with _lock:
        _passed[key] = time.monotonic() + PASSED_TTL


def uses_dns01(issuer: Issuer) -> bool:
    return any("dns01" in s for s in issuer.acme_spec.get("solvers", []))


def _names(request: CertificateRequest) -> list[str]:
    info = parse_csr(request.csr_pem)
    names = list(dict.fromkeys(info.dns_names))
    if info.common_name and info.common_name not in names and "." in info.common_name:
        names.append(info.common_name)
    return names


def check_names(
    issuer: Issuer, names: list[str], labels: Mapping[str, str] | None = None
) -> PreflightResult | None:
    """The first failing preflight among `names` (DNS-01 ones only) of a Certificate with
    `labels`, or None when all pass."""
    solvers = list(issuer.acme_spec.get("solvers", []))
    for name in names:
        wildcard = name.startswith("*.")
        base = name.removeprefix("*.").lower()
        choice = select_solver(solvers, base, wildcard, labels)
        if choice is None or choice.challenge_type != DNS01:
            continue
        key = (issuer.pk, issuer.generation, choice.index, base)
        if _cached(key):
            continue
        result = preflight.run(choice.solver, base)
        if not result.ok:
            return result
        _remember(key)
    return None


def before_order(request: CertificateRequest) -> SignOutcome | None:
    """None: go on and create the order. A pending outcome: wait (the preflight failed)."""
    issuer = request.issuer
    if not uses_dns01(issuer):
        return None
    if (
        request.get_condition("Ready") is not None
        and Order.objects.filter(request=request).exists()
    ):
        return None  # the order exists: the preflight was passed before
    try:
        names = _names(request)
    except CSRError:
        return None  # ensure_order reports it
    failed = check_names(issuer, names, certificate_labels_of(request))
    certificate = request.certificate
    if failed is None:
        if certificate is not None:
            _record(certificate, None)
        if not issuer.condition_is(CONDITION):
            # First pass (or the first after a failure): show it; later passes write nothing.
            names_text = ", ".join(names)
            record_on_issuer(issuer, PreflightResult(True, names_text, "preflight passed"))
        return None
    message = f"{FAILED}: {failed.dns_name}: {failed.message}"
    if certificate is not None:
        _record(certificate, failed)
    record_on_issuer(issuer, failed)
    return SignOutcome(SignState.PENDING, reason=FAILED, message=message, requeue_after=RETRY)


def _record(certificate: Certificate, failed: PreflightResult | None) -> None:
    """Set (or clear) the Certificate's DNSPreflight condition; a locked read-modify-write
    of `conditions`, so the certificate controller's own conditions are never lost."""
    if failed is None and certificate.get_condition(CONDITION) is None:
        return
    with transaction.atomic():
        fresh = Certificate.objects.select_for_update().filter(pk=certificate.pk).first()
        if fresh is None:
            return
        previous = fresh.get_condition(CONDITION)
        before = previous["message"] if previous else ""
        if failed is None:
            changed = fresh.set_condition(CONDITION, "True", PASSED, "", now=timezone.now())
        else:
            text = f"{failed.dns_name}: {failed.message}"
            changed = fresh.set_condition(CONDITION, "False", FAILED, text, now=timezone.now())
        if changed:
            fresh.save(update_fields=["conditions", "updated_at"])
    if failed is not None and before != f"{failed.dns_name}: {failed.message}":
        events.record(
            "Certificate",
            fresh.name,
            FAILED,
            f"{failed.dns_name}: {failed.message}; no ACME order is created until it passes "
            f"(next try in {int(RETRY.total_seconds())}s)",
            type_=Event.WARNING,
            certificate_name=fresh.name,
        )


def record_on_issuer(issuer: Issuer, result: PreflightResult) -> None:
    """The Issuer's DNSPreflight condition: the last preflight's outcome (issuer page)."""
    status, reason = ("True", PASSED) if result.ok else ("False", FAILED)
    with transaction.atomic():
        fresh = Issuer.objects.select_for_update().filter(pk=issuer.pk).first()
        if fresh is None:
            return
        text = f"{result.dns_name}: {result.message}"
        if fresh.set_condition(CONDITION, status, reason, text, now=timezone.now()):
            fresh.save(update_fields=["conditions", "updated_at"])


def test_name(issuer: Issuer, dns_name: str) -> PreflightResult:
    """The issuer page's "Test DNS": preflight one example name now (no cache), and record
    the outcome on the issuer."""
    solvers = list(issuer.acme_spec.get("solvers", []))
    wildcard = dns_name.startswith("*.")
    base = dns_name.removeprefix("*.").rstrip(".").lower()
    choice = select_solver(solvers, base, wildcard)
    if choice is None or choice.challenge_type != DNS01:
        result = PreflightResult(False, base, "no dns01 solver of this issuer is selected for it")
    else:
        result = preflight.run(choice.solver, base)
    record_on_issuer(issuer, result)
    return result
