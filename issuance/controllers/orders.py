"""Orders controller: one ACME order per Order row.

Each reconcile does at most one ACME write (plus the reads that follow it) and records
where it got to after every step:

    pass 1  (no url) ──newOrder──▶ pending; read the authorizations, create Challenges
    pass 2  (woken when every Challenge is valid) finalize(CSR) ──▶ processing (or valid;
            orderNotReady: read the order and try again when it is ready)
    pass 3+ poll (50 ms, backing off) ──▶ valid; download the chain ──▶ valid + certificate
            (final; the request is woken)

A pass that dies half-way resumes from the stored state (authorizations not loaded yet,
Challenges missing, finalize answered orderNotReady, chain not downloaded).

Any invalid challenge/authorization/order ends in invalid (the CA's problem as reason);
configuration errors (no solver) end in errored; an expired order in expired.

Crash safety of newOrder: `create_attempted_at` is committed before the call and the URL
right after it. If a worker dies in between, the next reconcile sees the attempt without
a URL and first looks for the order the CA already made (the account's orders list,
RFC 8555 §7.1.2.1, which Pebble offers): a pending/ready order with exactly our
identifiers that no other Order row owns is adopted. Let's Encrypt has no orders list but
reuses an identical pending order for the same account, so a repeated newOrder returns
the same order there. Only a CA with neither could leave one unused order behind; it
expires on its own and costs nothing.

A CA that does not answer (refused, timed out) never fails an order: the client raises
AcmeUnreachableError (temporary) and the order waits for the CA's probe, which wakes it
(issuance/acme/health.py). A newOrder that timed out is "attempted": the CA
may have made the order, so the recovery above runs before any new one is created. An
order the CA itself fails after such an outage starts a new ACME order instead
(order_retry.py).

CA fallback (acme/fallback.py): the server is chosen per ACME order among the
issuer's servers and stored on the row with `create_attempted_at`; the recovery above runs
at that server only, and the order moves to another CA only when the newOrder certainly
created nothing (a refusal, a pause, a connection never made).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from issuance.acme import fallback, health, ratelimit
from issuance.acme.issuer_waits import IssuerWaitError
from issuance.acme.protocol.client import AcmeClient
from issuance.acme.protocol.errors import AcmeProblemError, problem_reason
from issuance.acme.solvers.selection import describe_no_solver, select_solver
from issuance.controllers import faults, order_retry
from issuance.controllers.base import Result, TemporaryError
from issuance.controllers.order_challenges import ensure_challenges
from issuance.models import (
    Challenge,
    ChallengeState,
    Event,
    IssuerKind,
    Order,
    OrderState,
    certificate_labels_of,
)
from issuance.observability import events
from issuance.pki.csr import parse_csr
from issuance.pki.x509 import cert_info, split_pem_chain
from issuance.shapes import OrderAuthorization
from issuance.worker import wakeup

log = logging.getLogger("issuance.orders")

# Challenges wake their order when they finish; this is only a safety net.
PENDING_RECHECK = timedelta(minutes=5)
# How many of the newest account orders to inspect when recovering from a crash.
RECOVERY_SCAN = 50
CA_STATES = {s.value for s in OrderState if s.value}
FAILED_CHALLENGE_STATES = {ChallengeState.INVALID, ChallengeState.EXPIRED, ChallengeState.ERRORED}


def reconcile(order: Order) -> Result:
    if order.is_final and not _awaiting_download(order):
        return Result.done()
    issuer = order.issuer
    if issuer.kind != IssuerKind.ACME:
        return _fail(order, OrderState.ERRORED, f"Issuer {issuer.name} is not an ACME issuer")
    try:
        if not order.url:
            return _create(order)
        client = fallback.client_of_order(order)
        if order.state == OrderState.VALID:
            return _download(order, client)
        if not _authorizations_loaded(order):
            return _load_authorizations(order, client)
        if order.state == OrderState.PENDING:
            return _check_challenges(order, client)
        if order.state == OrderState.READY:
            return _finalize(order, client)
        return _poll(order, client)
    except AcmeProblemError as exc:
        if exc.short_type == "accountDoesNotExist":
            from issuance.acme.issuer import account_lost

            if order.server_index > 0:
                fallback.forget_account(issuer, order.server)
                raise TemporaryError(
                    f"the ACME account of {issuer.name} at {order.server} is gone;"
                    " registering again",
                    delay=timedelta(seconds=5),
                ) from None
            # The issuer registers again and then wakes its waiters (issuer_waits.py).
            account_lost(issuer, exc.detail)
            raise IssuerWaitError(
                f"the ACME account of {issuer.name} is gone; registering again"
            ) from None
        state = OrderState.INVALID if exc.status == 403 else OrderState.ERRORED
        return _fail(order, state, problem_reason(exc.type, exc.detail))


# -- steps ---------------------------------------------------------------------------------


def _identifiers(order: Order) -> list[tuple[str, str]]:
    spec = order.typed_spec
    return [("dns", str(n)) for n in spec.get("dnsNames") or []] + [
        ("ip", str(ip)) for ip in spec.get("ipAddresses") or []
    ]


def _create(order: Order) -> Result:
    """The ACME order: recovered after a crash, else made at the first server that takes it."""
    identifiers = _identifiers(order)
    if not identifiers:
        return _fail(order, OrderState.ERRORED, "the request names no DNS name or IP address")
    unsolvable = _unsolvable(order, identifiers)
    if unsolvable:
        return _fail(order, OrderState.ERRORED, unsolvable)
    pinned = None
    if order.create_attempted_at is not None:
        # Recovered at the server the attempt was made at, never elsewhere (fallback.py);
        # not found there, the order is asked of that same server again (a CA without an
        # orders list, like Let's Encrypt, hands back the identical pending order).
        pinned = fallback.endpoint_of(order)
        client = fallback.client_of_order(order)
        adopted = _recover(order, client, identifiers)
        if adopted is not None:
            _store_acme_order(order, adopted)
            _event(
                order,
                "OrderRecovered",
                f"Found the ACME order {order.url} created before a restart",
            )
            return _load_authorizations(order, client)
    client, acme_order = _order_at_first_taker(order, identifiers, pinned)
    faults.checkpoint("order-after-new-order")
    _store_acme_order(order, acme_order)
    _event(order, "OrderCreated", f"Created ACME order {order.url} ({order.state})")
    # The URL is stored; reading the authorizations in the same pass is no second write.
    return _load_authorizations(order, client, fresh=True)


def _unsolvable(order: Order, identifiers: list[tuple[str, str]]) -> str:
    """Why a DNS name of the order has no solver of the issuer, or ""."""
    solvers = list(order.issuer.acme_spec.get("solvers") or [])
    labels = certificate_labels_of(order)
    for kind, value in identifiers:
        wildcard = value.startswith("*.")
        name = value.removeprefix("*.")
        if kind == "dns" and select_solver(solvers, name, wildcard, labels) is None:
            return describe_no_solver(name, wildcard)
    return ""


def _order_at_first_taker(
    order: Order, identifiers: list[tuple[str, str]], pinned: fallback.Endpoint | None
) -> tuple[AcmeClient, dict[str, Any]]:
    """newOrder at the first server that takes it (CA fallback), the choice stored on the
    row before each call. A paused or unreachable CA is not called at all, so nothing is
    "attempted" there (no recovery scan later); newOrder is never an unreachable CA's probe.
    """
    for _ in range(len(fallback.endpoints(order.issuer)) + 1):
        choice = fallback.choose(order, pinned)
        pinned = None
        client = choice.client
        ratelimit.check_not_paused(client.directory_url)
        health.check_reachable(client.directory_url)
        fallback.store_choice(order, choice)
        try:
            profile = fallback.profile_for(order, choice.endpoint)
            return client, _new_order(order, client, identifiers, profile)
        except (AcmeProblemError, TemporaryError) as exc:
            if fallback.is_refusal(exc) and isinstance(exc, AcmeProblemError):
                if not fallback.record_refusal(order, choice.endpoint, exc):
                    raise  # every server refused: the order fails with the last refusal
            elif fallback.created_nothing(exc, choice.endpoint):
                fallback.clear_attempt(order, choice.endpoint, str(exc))
            else:
                raise
    raise TemporaryError("no ACME server took the order", delay=timedelta(seconds=5))


def _replaces_refused(exc: AcmeProblemError) -> bool:
    """The CA refused the order because of `replaces` (RFC 9773 §5): the certificate was
    already replaced, or the CA does not take it as ours. Not a rate limit or an outage."""
    if exc.short_type == "alreadyReplaced":
        return True
    return exc.status in (400, 403, 409) and "replaces" in exc.detail.lower()


def _new_order(
    order: Order, client: AcmeClient, identifiers: list[tuple[str, str]], profile: str | None
) -> dict[str, Any]:
    """newOrder with `replaces` (the ARI id of the certificate being renewed) when the spec
    has one; if the CA refuses that field, once more without it. The refused call created
    no order, so the retry cannot make a second one."""
    replaces = order.typed_spec.get("replaces") or None
    try:
        return client.new_order(identifiers, profile, replaces=replaces)
    except AcmeProblemError as exc:
        if replaces is None or not client.offers_ari or not _replaces_refused(exc):
            raise
        _event(
            order,
            "ReplacesRefused",
            f"The CA refused replaces={replaces} ({exc.describe()}); ordering without it",
            Event.WARNING,
        )
    return client.new_order(identifiers, profile)


def _recover(
    order: Order, client: AcmeClient, identifiers: list[tuple[str, str]]
) -> dict[str, Any] | None:
    wanted = sorted((t, v.lower()) for t, v in identifiers)
    try:
        urls = client.list_orders()
    except AcmeProblemError as exc:
        log.info("order %s: CA has no usable orders list (%s); creating anew", order.name, exc)
        return None
    for url in reversed(urls[-RECOVERY_SCAN:]):
        if Order.objects.filter(url=url).exists():
            continue
        candidate = client.get_order(url)
        got = sorted(
            (str(i.get("type")), str(i.get("value")).lower())
            for i in candidate.get("identifiers") or []
        )
        if got == wanted and candidate.get("status") in ("pending", "ready"):
            return candidate
    return None


def _store_acme_order(order: Order, acme: dict[str, Any]) -> None:
    order.url = str(acme["url"])
    order.finalize_url = str(acme.get("finalize") or "")
    order.certificate_url = str(acme.get("certificate") or "")
    order.state = _state(acme)
    authorizations: list[OrderAuthorization] = [
        {"url": str(u)} for u in acme.get("authorizations") or []
    ]
    order.authorizations = authorizations
    order.save(
        update_fields=[
            "url",
            "finalize_url",
            "certificate_url",
            "state",
            "authorizations",
            "updated_at",
        ]
    )


def _state(acme: dict[str, Any]) -> str:
    status = str(acme.get("status") or "")
    return status if status in CA_STATES else OrderState.PENDING


def _authorizations_loaded(order: Order) -> bool:
    return all("identifier" in a for a in order.typed_authorizations)


def _load_authorizations(order: Order, client: AcmeClient, *, fresh: bool = False) -> Result:
    """Copy each authorization (reads only) and create a Challenge per pending one.

    `fresh`: the ACME order was created in this pass, so no Challenge exists yet.
    """
    loaded: list[OrderAuthorization] = []
    for entry in order.typed_authorizations:
        authz = client.get_authorization(entry["url"])
        identifier = authz.get("identifier") or {}
        loaded.append(
            {
                "url": entry["url"],
                "identifier": str(identifier.get("value") or ""),
                "identifierType": str(identifier.get("type") or "dns"),
                "wildcard": bool(authz.get("wildcard")),
                "status": str(authz.get("status") or ""),
                "expires": str(authz.get("expires") or ""),
                "challenges": [
                    {
                        "type": c.get("type"),
                        "url": c.get("url"),
                        "token": c.get("token"),
                        "status": c.get("status"),
                    }
                    for c in authz.get("challenges") or []
                ],
                "error": _authz_error(authz),
            }
        )
    order.authorizations = loaded
    order.save(update_fields=["authorizations", "updated_at"])
    failed = [a for a in loaded if a["status"] not in ("pending", "valid")]
    if failed:
        first = failed[0]
        reason = first["error"] or f"authorization for {first['identifier']} is {first['status']}"
        state = OrderState.EXPIRED if first["status"] == "expired" else OrderState.INVALID
        return _fail(order, state, reason)
    problem = ensure_challenges(order, client, set() if fresh else None)
    if problem:
        return _fail(order, OrderState.ERRORED, problem)
    if order.state == OrderState.PENDING and any(a["status"] == "pending" for a in loaded):
        # Nothing to do until a challenge finishes (it wakes us); skip a no-op pass.
        return Result.after(PENDING_RECHECK)
    return Result.now()


def _authz_error(authz: dict[str, Any]) -> str:
    for chal in authz.get("challenges") or []:
        err = chal.get("error")
        if isinstance(err, dict) and (err.get("type") or err.get("detail")):
            return problem_reason(str(err.get("type") or ""), str(err.get("detail") or ""))
    return ""


class _ChallengeRow(NamedTuple):
    authorization_url: str
    state: str
    reason: str
    type: str
    dns_name: str


def _challenge_rows(order: Order) -> list[_ChallengeRow]:
    """The order's challenges, the columns the order reads: one plain statement (the ORM's
    deferred-field query and instances cost more than the rest of the pass)."""
    quote = connection.ops.quote_name
    by_name = {f.name: f.column for f in Challenge._meta.concrete_fields}
    columns = ", ".join(quote(by_name[f]) for f in _ChallengeRow._fields)
    table = quote(Challenge._meta.db_table)
    sql = f"SELECT {columns} FROM {table} WHERE {quote(by_name['order'])} = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [order.pk])
        return [_ChallengeRow(*row) for row in cursor.fetchall()]


def _check_challenges(order: Order, client: AcmeClient) -> Result:
    everything = _challenge_rows(order)
    problem = ensure_challenges(order, client, {c.authorization_url for c in everything})
    if problem:
        return _fail(order, OrderState.ERRORED, problem)
    pending = {a["url"] for a in order.typed_authorizations if a["status"] == "pending"}
    rows = [c for c in everything if c.authorization_url in pending]
    failed = [c for c in rows if c.state in FAILED_CHALLENGE_STATES]
    if failed:
        chal = failed[0]
        reason = chal.reason or f"{chal.type} challenge for {chal.dns_name} is {chal.state}"
        state = {
            ChallengeState.INVALID: OrderState.INVALID,
            ChallengeState.EXPIRED: OrderState.EXPIRED,
        }.get(ChallengeState(chal.state), OrderState.ERRORED)
        return _fail(order, state, reason)
    if len(rows) < len(pending) or any(c.state != ChallengeState.VALID for c in rows):
        return Result.after(PENDING_RECHECK)
    # Every authorization is valid on our side, so the order is ready: finalize right away.
    # A CA that has not caught up answers orderNotReady and _finalize reads the order.
    return _finalize(order, client)


def _sync(order: Order, acme: dict[str, Any], *, event_reason: str = "", note: str = "") -> Result:
    state = _state(acme)
    changed = state != order.state
    order.state = state
    order.certificate_url = str(acme.get("certificate") or order.certificate_url)
    order.finalize_url = str(acme.get("finalize") or order.finalize_url)
    if state in (OrderState.INVALID, OrderState.EXPIRED):
        err = acme.get("error") or {}
        reason = (
            problem_reason(str(err.get("type") or ""), str(err.get("detail") or ""))
            if isinstance(err, dict) and err
            else f"the ACME order is {state}"
        )
        return _fail(order, state, reason)
    if changed:
        order.save(update_fields=["state", "certificate_url", "finalize_url", "updated_at"])
        # "valid" is announced by the download's "Complete" a moment later.
        if state != OrderState.VALID or event_reason:
            _event(
                order, event_reason or f"Order{state.capitalize()}", f"{note}ACME order is {state}"
            )
    if state == OrderState.PENDING:
        # The CA has not caught up with the valid authorizations yet.
        return Result.after(timedelta(seconds=1))
    if state == OrderState.PROCESSING:
        return Result.after(_processing_delay(order))
    return Result.now()


def _finalize(order: Order, client: AcmeClient) -> Result:
    csr = order.request.csr_pem
    try:
        acme = client.finalize(order.finalize_url, csr)
    except AcmeProblemError as exc:
        if exc.short_type == "orderNotReady":
            # A finalize that went through before a timeout/crash: see where it stands.
            return _sync(order, client.get_order(order.url))
        return _fail(order, OrderState.INVALID, problem_reason(exc.type, exc.detail))
    acme["url"] = order.url
    result = _sync(order, acme, event_reason="Finalized", note="Sent the CSR to finalize; ")
    return _download(order, client) if _awaiting_download(order) else result


def _processing_delay(order: Order) -> timedelta:
    # updated_at only moves when the state changes, so this backs off geometrically from
    # 50 ms (Pebble and Let's Encrypt usually issue within a second) to 30 s.
    elapsed = (timezone.now() - order.updated_at).total_seconds()
    return timedelta(seconds=min(max(0.05, elapsed / 2), 30.0))


def _poll(order: Order, client: AcmeClient) -> Result:
    acme = client.get_order(order.url)
    if _state(acme) == OrderState.VALID and acme.get("certificate"):
        # Downloading is a read: take the chain as soon as the CA says valid, and store the
        # state with it (one write).
        order.state = OrderState.VALID
        order.certificate_url = str(acme["certificate"])
        return _download(order, client, also=("state", "certificate_url"))
    result = _sync(order, acme)
    return _download(order, client) if _awaiting_download(order) else result


def _awaiting_download(order: Order) -> bool:
    return order.state == OrderState.VALID and not order.certificate_pem


def _download(order: Order, client: AcmeClient, also: tuple[str, ...] = ()) -> Result:
    if not order.certificate_url:
        _sync(order, client.get_order(order.url))
        if not order.certificate_url:
            return _fail(order, OrderState.ERRORED, "the CA says valid but names no certificate")
    preferred = order.issuer.acme_spec.get("preferredChain") or None
    pem = client.download_certificate(order.certificate_url, preferred)
    if not split_pem_chain(pem):
        return _fail(order, OrderState.ERRORED, "the CA returned no PEM certificate chain")
    if cert_info(pem).public_key_der != parse_csr(order.request.csr_pem).public_key_der:
        # A CA that reuses pending orders (Let's Encrypt) may hand the same order to two
        # requests for the same names; only the one that finalized it may take the result.
        return _fail(
            order,
            OrderState.ERRORED,
            "the ACME order was finalized with another CSR (the CA reused the order)",
        )
    order.certificate_pem = pem
    order.reason = ""
    order.save(update_fields=["certificate_pem", "reason", "updated_at", *also])
    _event(
        order,
        "Complete",
        f"{fallback.issued_by_text(order)}: order completed, certificate chain downloaded",
    )
    _complete_request(order)
    return Result.done()


def _complete_request(order: Order) -> None:
    """Hand the chain to the request now, rather than waking it for a pass of its own that
    would only copy it (the request's controller does the same if woken: it finishes a
    request only once)."""
    from issuance.acme.issuer import outcome_of
    from issuance.controllers import certificaterequests
    from issuance.issuers.base import SignState

    request = order.request
    if request.is_final:
        return
    if request.issuer_id == order.issuer_id:
        request.issuer = order.issuer  # loaded with the order: no query for the same row
    outcome = outcome_of(request, order)
    if outcome.state == SignState.PENDING:
        wakeup.wake(request)
        return
    certificaterequests.store_outcome(request, outcome)


# -- helpers ---------------------------------------------------------------------------------


def _fail(order: Order, state: str, reason: str) -> Result:
    if order_retry.restart_after_outage(order, state, reason):
        return Result.now()
    order.state = state
    order.reason = reason
    order.failure_time = timezone.now()
    order.save(update_fields=["state", "reason", "failure_time", "updated_at"])
    _event(order, "Failed", f"Order {state}: {reason}", type_=Event.WARNING)
    wakeup.wake(order.request)
    return Result.done()


def _event(order: Order, reason: str, message: str, type_: str = Event.NORMAL) -> None:
    events.record_on(order, reason, message, type_)
