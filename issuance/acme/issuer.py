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
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance.acme import ari, issuer_waits, servers
from issuance.acme.accounts import (
    account_config,
    ensure_account_key,
    forget_clients,
    probe_server,
    register_account,
)
from issuance.acme.protocol.account import AccountConfigError
from issuance.acme.protocol.errors import AcmeProblemError, AcmeUnreachableError, problem_type
from issuance.acme.solvers import usability
from issuance.controllers.base import Result, TemporaryError
from issuance.controllers.dbutil import guarded
from issuance.issuers.base import SignOutcome, SignState
from issuance.issuers.local import SigningError, requested_duration, shortened_message
from issuance.models import (
    CertificateRequest,
    Event,
    Issuer,
    Order,
    OrderState,
    certificate_name_of,
)
from issuance.observability import events
from issuance.pki.csr import CSRError, parse_csr
from issuance.pki.x509 import load_leaf, split_pem_chain
from issuance.shapes import IssuerRef, OrderSpec
from issuance.worker import wakeup

log = logging.getLogger("issuance.acme.issuer")

# A spec the CA refused (bad EAB key, unknown server): look again now and then, since a
# referenced Secret may be fixed without a spec change.
NOT_READY_RECHECK = timedelta(minutes=10)
CA_UNREACHABLE = AcmeUnreachableError.REASON
REGISTERED = "The ACME account was registered with the ACME server"


# -- issuer: the ACME account ------------------------------------------------------------


def reconcile_issuer(issuer: Issuer) -> Result:
    acme_spec = issuer.spec.get("acme") if isinstance(issuer.spec, dict) else None
    problem = usability.unusable_solver((acme_spec or {}).get("solvers") or [])
    if problem:
        # Stored as cert-manager documents it, but it cannot run here (usability.py).
        _set_ready(issuer, "False", usability.REASON, problem)
        return Result.after(NOT_READY_RECHECK)
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
    try:
        if ensure_account_key(issuer):
            events.record(
                "Issuer", issuer.name, "AccountKeyGenerated", "Generated an ACME account key"
            )
    except AccountConfigError as exc:  # disableAccountKeyGeneration and no key to read
        _set_ready(issuer, "False", "ErrGetAccountKey", str(exc))
        return Result.after(NOT_READY_RECHECK)
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
    with transaction.atomic():
        issuer.save(update_fields=["acme_account_uri", "acme_account_fingerprint", "updated_at"])
        # What waited for the account is due now, committed with it (issuer_waits.py).
        issuer_waits.wake_waiters(issuer)
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
    cond = issuer.get_condition("Ready")
    return str(cond.get("reason") or "") if cond else ""


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


def order_name(request: CertificateRequest, spec: OrderSpec) -> str:
    """`<request>-<hash of the order spec>`, like cert-manager (≤ 253 characters)."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{request.name[: 253 - 11]}-{digest}"


def order_spec(request: CertificateRequest) -> OrderSpec:
    info = parse_csr(request.csr_pem)
    issuer = request.issuer
    request_spec = request.typed_spec
    spec_ref = request_spec.get("issuerRef")
    kind = spec_ref.get("kind") if spec_ref else None
    issuer_ref: IssuerRef = {"name": issuer.name, "kind": str(kind or "Issuer")}
    dns_names = list(dict.fromkeys(info.dns_names))
    # As cert-manager: a commonName that is not among the SANs is still an identifier.
    if (
        info.common_name
        and info.common_name not in dns_names
        and info.common_name not in info.ip_addresses
    ):
        dns_names.append(info.common_name)
    spec: OrderSpec = {
        "request": request.name,
        "issuerRef": issuer_ref,
        "dnsNames": dns_names,
        "commonName": info.common_name,
        "ipAddresses": list(info.ip_addresses),
    }
    if request_spec.get("duration"):
        spec["duration"] = request_spec["duration"]
    profile = issuer.acme_spec.get("profile")
    if profile:
        spec["profile"] = str(profile)
    replaces = ari.replaces_for(request)
    if replaces:  # RFC 9773 §5: the renewal names the certificate it replaces
        spec["replaces"] = replaces
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
        # Another worker (or our previous life) made it: OneToOne on request. A pass whose
        # insert committed as the database went away never recorded it: recorded now.
        order = Order.objects.get(request=request)
        _record_order_created(request, order, spec, events.record_if_missing)
        return order, False
    transaction.on_commit(wakeup.notify_workers)  # created due now
    _record_order_created(request, order, spec, events.record)
    return order, True


def _record_order_created(
    request: CertificateRequest, order: Order, spec: OrderSpec, record: Callable[..., object]
) -> None:
    record(
        "Order",
        order.name,
        "Created",
        f"Created Order for {', '.join(spec['dnsNames'] + spec['ipAddresses'])}",
        certificate_name=certificate_name_of(request),
    )
    record(
        "CertificateRequest",
        request.name,
        "OrderCreated",
        f"Created Order resource {order.name}",
        certificate_name=certificate_name_of(request),
    )


def split_problem(reason: str, fallback: str) -> tuple[str, str]:
    """("urn:…:unauthorized", "detail") from an Order reason "urn:…:unauthorized: detail"."""
    if reason.startswith("urn:") and ": " in reason:
        type_, detail = reason.split(": ", 1)
        return problem_type(type_), detail
    return fallback, reason


def sign(request: CertificateRequest) -> SignOutcome:
    from issuance.acme.solvers.preflight_step import before_order

    # DNS-01 preflight (zone, credentials, CNAME) before any order is spent.
    waiting = before_order(request)
    if waiting is not None:
        return waiting
    try:
        order, _created = ensure_order(request)
    except CSRError as exc:
        return SignOutcome(SignState.FAILED, reason="InvalidCSR", message=str(exc))
    return outcome_of(request, order)


# Below this a shorter life is clock skew and transfer time, not the server's choice.
SHORTENED_TOLERANCE = timedelta(minutes=5)


def _shortened_by_server(request: CertificateRequest, chain_pem: str) -> str:
    """Why the certificate lives shorter than `spec.duration` asked ('' when it does not, or
    when no duration was asked): an ACME order carries no lifetime, the server picks it."""
    spec = request.typed_spec
    if not spec.get("duration") and spec.get("expirationSeconds") is None:
        return ""
    try:
        asked = requested_duration(request)
        left = load_leaf(chain_pem).not_valid_after_utc - timezone.now()
    except (SigningError, ValueError):
        return ""
    if left >= asked - SHORTENED_TOLERANCE:
        return ""
    return shortened_message(
        left,
        asked,
        "the ACME server decides how long a certificate lives (an ACME order cannot ask for "
        "a duration)",
    )


def outcome_of(request: CertificateRequest, order: Order) -> SignOutcome:
    """What the request's Order means for it: issued, failed, or still pending."""
    if order.state == OrderState.VALID and order.certificate_pem:
        blocks = split_pem_chain(order.certificate_pem)
        # As cert-manager for ACME: the CA is the chain's last certificate.
        ca_pem = blocks[-1] if len(blocks) > 1 else ""
        return SignOutcome(
            SignState.ISSUED,
            certificate_pem=order.certificate_pem,
            ca_pem=ca_pem,
            shortened=_shortened_by_server(request, order.certificate_pem),
        )
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
