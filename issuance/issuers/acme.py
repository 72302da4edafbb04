"""ACME issuer kind: the account (issuer controller) and one Order per approved request.

`reconcile_issuer` registers the ACME account (key made once, stored encrypted before any
call) and keeps the Ready condition. `sign` is called by the CertificateRequest controller:
it makes sure the request's single Order exists and reports its state; the orders
controller does the ACME work and wakes the request when the Order reaches a final state.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance import events
from issuance.acme.account import AccountConfigError
from issuance.acme.errors import AcmeProblemError, AcmeUnreachableError, problem_type
from issuance.controllers.acme import fallback, servers
from issuance.controllers.acme.accounts import (
    account_config,
    client_for,
    ensure_account_key,
    forget_clients,
    probe_server,
    register_account,
)
from issuance.controllers.base import Result, TemporaryError
from issuance.dbutil import guarded
from issuance.issuers.base import SignOutcome, SignState
from issuance.models import (
    CertificateRequest,
    Event,
    Issuer,
    Order,
    OrderState,
    certificate_name_of,
)
from issuance.pki.csr import CSRError, parse_csr
from issuance.pki.x509 import split_pem_chain
from issuance.worker import wakeup

log = logging.getLogger("issuance.issuers.acme")

# A spec the CA refused (bad EAB key, unknown server): look again now and then, since a
# referenced Secret may be fixed without a spec change.
NOT_READY_RECHECK = timedelta(minutes=10)
CA_UNREACHABLE = AcmeUnreachableError.REASON
REGISTERED = "The ACME account was registered with the ACME server"


# -- issuer: the ACME account ------------------------------------------------------------


def reconcile_issuer(issuer: Issuer) -> Result:
    try:
        config = account_config(issuer)
    except AccountConfigError as exc:
        _set_ready(issuer, "False", "ErrInvalidConfig", str(exc))
        return Result.after(NOT_READY_RECHECK)
    if servers.read(config.server, fresh=True).unreachable:
        return _wait_for_ca(issuer, config.server)
    fingerprint = config.fingerprint()
    registered = (
        issuer.acme_account_uri
        and issuer.acme_account_fingerprint == fingerprint
        and issuer.observed_generation == issuer.generation
    )
    if registered and _ready_reason(issuer) == CA_UNREACHABLE:
        # The CA answers again and nothing changed meanwhile: the account stands.
        _set_ready(issuer, "True", "ACMEAccountRegistered", REGISTERED, event=False)
        return Result.done()
    if registered and issuer.is_ready:
        return Result.done()
    if ensure_account_key(issuer):
        events.record("Issuer", issuer.name, "AccountKeyGenerated", "Generated an ACME account key")
    try:
        uri = register_account(issuer, config)
    except AcmeUnreachableError as exc:
        _show_unreachable(issuer, exc.error, exc.since)
        return Result.after(exc.probe_wait(timezone.now()))
    except AcmeProblemError as exc:
        _set_ready(
            issuer,
            "False",
            "ErrRegisterACMEAccount",
            f"Failed to register ACME account: {exc.describe()}",
        )
        return Result.after(NOT_READY_RECHECK)
    except AccountConfigError as exc:
        _set_ready(issuer, "False", "ErrRegisterACMEAccount", str(exc))
        return Result.after(NOT_READY_RECHECK)
    except TemporaryError as exc:
        # Paused, or an answer that was no answer (5xx): say so, and let the worker retry.
        _set_ready(
            issuer, "False", "ErrRegisterACMEAccount", f"Failed to register ACME account: {exc}"
        )
        raise
    changed_account = uri != issuer.acme_account_uri
    issuer.acme_account_uri = uri
    issuer.acme_account_fingerprint = fingerprint
    issuer.save(update_fields=["acme_account_uri", "acme_account_fingerprint", "updated_at"])
    _set_ready(issuer, "True", "ACMEAccountRegistered", REGISTERED)
    if changed_account:
        events.record("Issuer", issuer.name, "ACMEAccountRegistered", f"ACME account {uri}")
    return Result.done()


def _wait_for_ca(issuer: Issuer, server: str) -> Result:
    """The CA does not answer: show it, and probe it when it is time (one prober at a time
    for all issuers and workers; health.py). The first answer wakes everything waiting."""
    try:
        probe_server(issuer, server)
    except AcmeUnreachableError as exc:
        _show_unreachable(issuer, exc.error, exc.since)
        return Result.after(exc.probe_wait(timezone.now()))
    except (TemporaryError, AcmeProblemError) as exc:
        # An answer, if not a good one: the CA is reachable again; the normal path decides.
        log.info("probe of %s answered: %s", server, exc)
    return Result.now()


def _ready_reason(issuer: Issuer) -> str:
    return str((issuer.get_condition("Ready") or {}).get("reason") or "")


def _show_unreachable(issuer: Issuer, error: str, since: datetime) -> None:
    """Ready=False, CAUnreachable: `<error> since <time>`. The timeline entries of an outage
    are written once per outage by health.py, not here."""
    when = since.strftime("%Y-%m-%d %H:%M:%S UTC")
    _set_ready(issuer, "False", CA_UNREACHABLE, f"{error} since {when}", event=False)


def account_lost(issuer: Issuer, detail: str) -> None:
    """The CA no longer knows our account (e.g. a test CA restarted): register again."""
    fresh = Issuer.objects.get(pk=issuer.pk)
    _set_ready(fresh, "False", "ErrAccountNotFound", f"The ACME account is gone: {detail}")
    forget_clients()
    wakeup.wake(fresh)


def _set_ready(
    issuer: Issuer, status: str, reason: str, message: str, *, event: bool = True
) -> None:
    was = issuer.get_condition("Ready")
    changed = issuer.set_condition("Ready", status, reason, message, now=timezone.now())
    if not changed and issuer.observed_generation == issuer.generation:
        return
    issuer.observed_generation = issuer.generation
    issuer.status_message = "" if status == "True" else message
    issuer.save(update_fields=["conditions", "observed_generation", "status_message", "updated_at"])
    if event and (was is None or was.get("status") != status or was.get("message") != message):
        events.record(
            "Issuer",
            issuer.name,
            reason,
            message,
            type_=Event.NORMAL if status == "True" else Event.WARNING,
        )


# -- requests: one Order each --------------------------------------------------------------


def order_name(request: CertificateRequest, spec: dict[str, Any]) -> str:
    """`<request>-<hash of the order spec>`, like cert-manager (≤ 253 characters)."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{request.name[: 253 - 11]}-{digest}"


def order_spec(request: CertificateRequest) -> dict[str, Any]:
    info = parse_csr(request.csr_pem)
    issuer = request.issuer
    spec_ref = request.spec.get("issuerRef") or {}
    issuer_ref = {"name": issuer.name, "kind": str(spec_ref.get("kind") or "Issuer")}
    dns_names = list(dict.fromkeys(info.dns_names))
    # As cert-manager: a commonName that is not among the SANs is still an identifier.
    if (
        info.common_name
        and info.common_name not in dns_names
        and info.common_name not in info.ip_addresses
    ):
        dns_names.append(info.common_name)
    spec: dict[str, Any] = {
        "request": request.name,
        "issuerRef": issuer_ref,
        "dnsNames": dns_names,
        "commonName": info.common_name,
        "ipAddresses": list(info.ip_addresses),
    }
    if request.spec.get("duration"):
        spec["duration"] = request.spec["duration"]
    profile = issuer.kind_spec.get("profile")
    if profile:
        spec["profile"] = str(profile)
    return spec


def ensure_order(request: CertificateRequest) -> tuple[Order, bool]:
    """The request's one Order; created (due now) if missing. Returns (order, created)."""
    # A request this signer never answered (no Ready condition yet) almost surely has no
    # Order: insert at once, and look the Order up only when the insert finds one.
    if request.get_condition("Ready") is not None:
        existing = Order.objects.filter(request=request).first()
        if existing is not None:
            return existing, False
    spec = order_spec(request)
    try:
        with guarded():
            order = Order.objects.create(
                name=order_name(request, spec),
                request=request,
                issuer=request.issuer,
                spec=spec,
                due_at=timezone.now(),
            )
    except IntegrityError:
        # Another worker (or our previous life) made it: OneToOne on request.
        return Order.objects.get(request=request), False
    transaction.on_commit(wakeup.notify_workers)  # created due now
    events.record(
        "Order",
        order.name,
        "Created",
        f"Created Order for {', '.join(spec['dnsNames'] + spec['ipAddresses'])}",
        certificate_name=certificate_name_of(request),
    )
    events.record(
        "CertificateRequest",
        request.name,
        "OrderCreated",
        f"Created Order resource {order.name}",
        certificate_name=certificate_name_of(request),
    )
    return order, True


def split_problem(reason: str, fallback: str) -> tuple[str, str]:
    """("urn:…:unauthorized", "detail") from an Order reason "urn:…:unauthorized: detail"."""
    if reason.startswith("urn:") and ": " in reason:
        type_, detail = reason.split(": ", 1)
        return problem_type(type_), detail
    return fallback, reason


def sign(request: CertificateRequest) -> SignOutcome:
    try:
        order, _created = ensure_order(request)
    except CSRError as exc:
        return SignOutcome(SignState.FAILED, reason="InvalidCSR", message=str(exc))
    return outcome_of(request, order)


def outcome_of(request: CertificateRequest, order: Order) -> SignOutcome:
    """What the request's Order means for it: issued, failed, or still pending."""
    if order.state == OrderState.VALID and order.certificate_pem:
        blocks = split_pem_chain(order.certificate_pem)
        # As cert-manager for ACME: the CA is the chain's last certificate.
        ca_pem = blocks[-1] if len(blocks) > 1 else ""
        _update_ari(request, order.certificate_pem, order)
        return SignOutcome(SignState.ISSUED, certificate_pem=order.certificate_pem, ca_pem=ca_pem)
    if order.is_final:
        type_, detail = split_problem(order.reason, order.state or "errored")
        return SignOutcome(
            SignState.FAILED,
            reason=f"OrderFailed: {type_}",
            message=f"Order {order.name} is {order.state}: {detail}",
        )
    # The orders controller wakes the request when the order reaches a final state.
    return SignOutcome(
        SignState.PENDING, message=f"Waiting on Order {order.name} ({order.state or 'new'})"
    )


def ari_point(name: str, start: datetime, end: datetime) -> datetime:
    """A deterministic moment in the CA's window, spread per certificate (RFC 9773 §4.2)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return start + (end - start) * (digest / 2**64)


def _update_ari(request: CertificateRequest, chain_pem: str, order: Order | None = None) -> None:
    """Record the CA's ARI suggestion on the Certificate (readiness prefers it), if offered."""
    certificate = request.certificate
    if certificate is None:
        return
    try:
        # Asked of the CA that issued it (CA fallback: not always the issuer's first).
        client = fallback.client_of_order(order) if order else client_for(request.issuer)
        window = client.renewal_info(chain_pem)
    except (TemporaryError, AcmeProblemError, ValueError) as exc:
        log.info("no ARI window for %s (kept as it was): %s", request.name, exc)
        return
    when = ari_point(certificate.name, *window) if window else None
    if when != certificate.ari_renewal_time:
        # A stale window from the previous certificate must not outlive it.
        type(certificate).objects.filter(pk=certificate.pk).update(ari_renewal_time=when)
        certificate.ari_renewal_time = when
