"""CA fallback: which of an issuer's ACME servers a new ACME order is made at.

An ACME issuer names its server (`spec.acme.server`) and may list further ones
(`spec.acme.fallback`). Each new ACME order goes to the first server, in that order, that

- is not recorded unreachable (health.py; an unreachable fallback is probed here when its
  probe is due, since no issuer controller probes fallbacks),
- is not paused by a rate limit (ratelimit.py),
- has not refused this Order already (`Order.server_refusals`, see REFUSALS), and
- has an account (the first server's is registered by the issuer controller; a fallback's
  is registered here, lazily, with the issuer's one account key, and its URI kept in
  `Issuer.acme_fallback_accounts`).

The choice is made per ACME order, so renewals start again at the first server as soon as
it is healthy. The orders controller stores the chosen server on the Order with
`create_attempted_at`, before newOrder: after a crash it recovers the order at that same
server (never a second order at another CA), and a newOrder that may have reached a CA
(it timed out) waits for that CA. Only a newOrder that certainly created nothing (the CA
answered with a refusal or a pause, or the connection was never made) moves on.

When no server can take the order, a TemporaryError says why, with the shortest wait
(pause end, next probe) as its delay.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import CharField, OuterRef, QuerySet, Subquery, Value
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from issuance.acme import health, ratelimit, servers
from issuance.acme.accounts import _eab_hmac_key, client_for, ensure_account_key
from issuance.acme.protocol.account import (
    AccountConfig,
    AccountConfigError,
    load_account_key,
    register,
)
from issuance.acme.protocol.client import AcmeClient, TLSOptions, probe, tls_options
from issuance.acme.protocol.errors import AcmeProblemError, AcmeUnreachableError, problem_reason
from issuance.acme.record import DATABASE_RECORD
from issuance.controllers.base import TemporaryError
from issuance.models import (
    Certificate,
    CertificateRequest,
    Event,
    Issuer,
    Order,
    OrderState,
)
from issuance.observability import events
from issuance.pki.x509 import split_pem_chain
from issuance.shapes import ExternalAccountBinding

# Problems on newOrder that another CA may not have: its policy or limits for these names
# (rejectedIdentifier, unsupportedIdentifier, caa, unauthorized), an account-level demand
# (userActionRequired: new terms to agree to; externalAccountRequired), a limit without
# Retry-After (rateLimited), or a profile it does not offer (invalidProfile). Anything else
# (malformed, badCSR, ...) would fail the same way everywhere and fails the order.
REFUSALS = frozenset(
    {
        "rejectedIdentifier",
        "unsupportedIdentifier",
        "caa",
        "unauthorized",
        "userActionRequired",
        "externalAccountRequired",
        "rateLimited",
        "invalidProfile",
    }
)
# When every server is out for reasons that no timer ends (refusals of account
# registration: a configuration problem), look again after this long.
CONFIG_RECHECK = timedelta(minutes=10)
# A fallback server skipped for a temporary error without a wait of its own: look again
# after this long. (The first server without an account parks the order until the issuer
# registers it: issuer_waits.py.)
ACCOUNT_WAIT = timedelta(seconds=5)


@dataclass(frozen=True)
class Endpoint:
    """One ACME server of an issuer: 0 is spec.acme.server, n is spec.acme.fallback[n-1]."""

    index: int
    server: str
    email: str
    eab: ExternalAccountBinding
    profile: str
    tls: TLSOptions

    @property
    def label(self) -> str:
        return self.server if self.index == 0 else f"{self.server} (fallback {self.index})"

    def eab_path(self) -> str:
        where = "spec.acme" if self.index == 0 else f"spec.acme.fallback[{self.index - 1}]"
        return f"{where}.externalAccountBinding"


def endpoints(issuer: Issuer) -> list[Endpoint]:
    spec = issuer.acme_spec
    first = Endpoint(
        0,
        spec.get("server", ""),
        spec.get("email", ""),
        spec.get("externalAccountBinding", {}),
        spec.get("profile", ""),
        tls_options(spec),
    )
    out = [first]
    for i, item in enumerate(spec.get("fallback", [])):
        if not item.get("server"):
            continue
        out.append(
            Endpoint(
                i + 1,
                item["server"],
                # The first server's contact unless the fallback names its own.
                item.get("email") or first.email,
                item.get("externalAccountBinding", {}),
                item.get("profile", ""),
                tls_options(item),
            )
        )
    return out


def endpoint_of(order: Order) -> Endpoint | None:
    """The server the order's current ACME order is (or was attempted) at; None when the
    issuer no longer lists it."""
    listed = endpoints(order.issuer)
    if not order.server:
        return listed[0]  # rows from before fallbacks: the first server
    for endpoint in listed:
        if endpoint.server == order.server:
            return endpoint
    return None


def client_of_order(order: Order) -> AcmeClient:
    """The client at the server the Order's ACME order is (or was attempted) at: its
    challenges, finalize, download and ARI all go there."""
    endpoint = endpoint_of(order)
    if endpoint is None:
        raise TemporaryError(
            f"the issuer no longer lists {order.server}, where this order was made",
            delay=CONFIG_RECHECK,
        )
    return client_for_endpoint(order.issuer, endpoint)


def client_of_request(request: CertificateRequest) -> AcmeClient:
    """The client at the CA that issued `request`'s certificate (its ARI goes there): the
    server of the request's Order, else the issuer's first. No query when the issuer lists
    no fallback (the common case, polled for every certificate)."""
    issuer = request.issuer
    if not issuer.acme_spec.get("fallback"):
        return client_for(issuer)
    order = Order.objects.filter(request_id=request.pk).exclude(server="").first()
    return client_of_order(order) if order is not None else client_for(issuer)


def client_of_certificate(issuer: Issuer, chain_pem: str) -> AcmeClient:
    """The client at the CA that issued this certificate (its revocation goes there): the
    server of the Order that downloaded it, else the issuer's first. The lookup by PEM
    scans the issuer's Orders, so it is for rare calls (a revocation), and skipped when the
    issuer lists no fallback."""
    blocks = split_pem_chain(chain_pem)
    if blocks and issuer.acme_spec.get("fallback"):
        order = (
            Order.objects.filter(issuer=issuer, certificate_pem__startswith=blocks[0].rstrip())
            .exclude(server="")
            .select_related("issuer")
            .first()
        )
        if order is not None:
            return client_of_order(order)
    return client_for(issuer)


def profile_for(order: Order, endpoint: Endpoint) -> str | None:
    """The first server's profile is in the Order's spec; a fallback has its own."""
    if endpoint.index == 0:
        return str(order.spec.get("profile") or "") or None
    return endpoint.profile or None


# -- accounts at fallback servers ------------------------------------------------------------


def _config(endpoint: Endpoint) -> AccountConfig:
    eab = endpoint.eab
    key_id = str(eab.get("keyID") or "")
    try:
        hmac_key = _eab_hmac_key(eab) if key_id else ""
    except AccountConfigError as exc:
        raise AccountConfigError(
            str(exc).replace("spec.acme.externalAccountBinding", endpoint.eab_path())
        ) from None
    return AccountConfig(
        server=endpoint.server,
        email=endpoint.email,
        eab_key_id=key_id,
        eab_hmac_key=hmac_key,
        eab_algorithm=str(eab.get("keyAlgorithm") or "HS256"),
    )


_clients_lock = threading.Lock()
_clients: dict[tuple[int, str, str, str, TLSOptions], AcmeClient] = {}


def client_for_endpoint(issuer: Issuer, endpoint: Endpoint) -> AcmeClient:
    """The issuer's client at this server; a fallback's account is registered on first use
    (the key exists before the call, and the same key finds the same account again, so a
    crash between registering and storing the URI makes no second account)."""
    if endpoint.index == 0:
        return client_for(issuer)
    config = _config(endpoint)
    fingerprint = config.fingerprint()
    known = (issuer.acme_fallback_accounts or {}).get(endpoint.server) or {}
    uri = str(known.get("uri") or "") if known.get("fingerprint") == fingerprint else ""
    if uri and issuer.acme_account_key_ciphertext:
        # A changed caBundle / skipTLSVerify makes a new client (new connections).
        cache_key = (
            issuer.pk,
            endpoint.server,
            uri,
            issuer.acme_account_key_ciphertext[-16:],
            endpoint.tls,
        )
        with _clients_lock:
            client = _clients.get(cache_key)
        if client is None:
            key = load_account_key(issuer.acme_account_key_ciphertext)
            client = AcmeClient(endpoint.server, key, uri, endpoint.tls, DATABASE_RECORD)
            with _clients_lock:
                _clients[cache_key] = client
        return client
    if ensure_account_key(issuer):
        events.record("Issuer", issuer.name, "AccountKeyGenerated", "Generated an ACME account key")
    key = load_account_key(issuer.acme_account_key_ciphertext)
    client = AcmeClient(endpoint.server, key, "", endpoint.tls, DATABASE_RECORD)
    uri = register(client, config, known=bool(known.get("uri")))
    client.account_uri = uri
    _store_account(issuer, endpoint.server, uri, fingerprint)
    events.record(
        "Issuer",
        issuer.name,
        "ACMEAccountRegistered",
        f"ACME account {uri} at {endpoint.label}",
    )
    return client


def _store_account(issuer: Issuer, server: str, uri: str, fingerprint: str) -> None:
    """Merge into the stored map under a row lock (another worker may add another server)."""
    with transaction.atomic():
        locked = Issuer.objects.select_for_update().only("pk", "acme_fallback_accounts")
        accounts = dict(locked.get(pk=issuer.pk).acme_fallback_accounts or {})
        accounts[server] = {"uri": uri, "fingerprint": fingerprint}
        Issuer.objects.filter(pk=issuer.pk).update(acme_fallback_accounts=accounts)
    issuer.acme_fallback_accounts = accounts


def forget_account(issuer: Issuer, server: str) -> None:
    """The fallback CA no longer knows the account: register again on next use."""
    with transaction.atomic():
        locked = Issuer.objects.select_for_update().only("pk", "acme_fallback_accounts")
        accounts = dict(locked.get(pk=issuer.pk).acme_fallback_accounts or {})
        accounts.pop(server, None)
        Issuer.objects.filter(pk=issuer.pk).update(acme_fallback_accounts=accounts)
    issuer.acme_fallback_accounts = accounts
    forget_clients()


def forget_clients() -> None:
    with _clients_lock:
        _clients.clear()


# -- the choice -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    endpoint: Endpoint
    client: AcmeClient
    skipped: list[str]


def _reachable(endpoint: Endpoint) -> bool:
    state = servers.read(endpoint.server)
    if not state.unreachable:
        return True
    if endpoint.index == 0:
        return False  # the issuer controller probes the first server
    try:
        probe(endpoint.server, endpoint.tls, DATABASE_RECORD)
    except AcmeUnreachableError:
        return False
    except (TemporaryError, AcmeProblemError):
        pass  # an answer, if not a good one: reachable again
    return not servers.read(endpoint.server, fresh=True).unreachable


def choose(order: Order, pinned: Endpoint | None = None) -> Choice:
    """The first of the issuer's servers that can take a new ACME order for this Order, or
    TemporaryError (delay: the shortest wait) when none can now. `pinned`: the server of an
    interrupted attempt, which must be asked again rather than another."""
    issuer = order.issuer
    if pinned is not None:
        return Choice(pinned, client_for_endpoint(issuer, pinned), [])
    refused = {str(r.get("server")) for r in order.server_refusals or []}
    now = timezone.now()
    skipped: list[str] = []
    waits: list[timedelta] = []
    listed = endpoints(issuer)
    for endpoint in listed:
        if endpoint.server in refused:
            skipped.append(f"{endpoint.label} refused this order")
            continue
        until = ratelimit.paused_until(endpoint.server)
        if until is not None:
            reason = servers.read(endpoint.server).pause_reason
            skipped.append(f"{endpoint.label} is paused until {until.isoformat()}: {reason}")
            waits.append(until - now)
            continue
        if not _reachable(endpoint):
            state = servers.read(endpoint.server)
            skipped.append(f"{endpoint.label} is unreachable: {state.unreachable_error}")
            probe_at = state.probe_at or now
            waits.append(max(probe_at - now, timedelta(seconds=1)))
            continue
        try:
            client = client_for_endpoint(issuer, endpoint)
        except AcmeUnreachableError as exc:
            skipped.append(f"{endpoint.label} is unreachable: {exc.error}")
            waits.append(exc.probe_wait(now))
            continue
        except TemporaryError as exc:
            if endpoint.index == 0 and not issuer.acme_account_uri:
                # The first server is healthy but its account is not registered yet: wait
                # for the issuer controller (which wakes the order: issuer_waits.py) rather
                # than spend the order elsewhere.
                raise
            skipped.append(f"{endpoint.label}: {exc}")
            waits.append(exc.delay or ACCOUNT_WAIT)
            continue
        except (AcmeProblemError, AccountConfigError) as exc:
            skipped.append(f"{endpoint.label}: cannot register an account: {exc}")
            continue
        return Choice(endpoint, client, skipped)
    delay = max(min(waits), timedelta(seconds=1)) if waits else CONFIG_RECHECK
    if listed[0].server not in refused:
        # The first server's own error (AcmeUnreachableError, AcmePausedError), as without
        # fallbacks: pages and reasons read it. With fallbacks, look again at the shortest
        # wait: a fallback's return wakes nothing (health.py wakes the first server's).
        try:
            ratelimit.check_not_paused(listed[0].server)
            health.check_reachable(listed[0].server)
        except TemporaryError as exc:
            if len(listed) > 1:
                exc.delay = delay
                exc.args = (f"{exc} (and {'; '.join(skipped[1:])})",)
            raise
    raise TemporaryError("no ACME server can take the order: " + "; ".join(skipped), delay=delay)


def created_nothing(exc: Exception, endpoint: Endpoint) -> bool:
    """A newOrder that raised `exc` certainly made no order at the CA (so another CA may be
    asked): the CA answered with a pause, or the connection was never made."""
    if isinstance(exc, AcmeUnreachableError):
        return not exc.request_sent
    if isinstance(exc, AcmeProblemError):
        return False
    if isinstance(exc, TemporaryError):
        return ratelimit.paused_until(endpoint.server) is not None
    return False


def is_refusal(exc: Exception) -> bool:
    return isinstance(exc, AcmeProblemError) and exc.short_type in REFUSALS


def record_refusal(order: Order, endpoint: Endpoint, exc: AcmeProblemError) -> bool:
    """Remember the refusal (that server is not asked again for this Order) and clear the
    attempt in one write. Returns whether another server remains to be asked."""
    now = timezone.now()
    reason = problem_reason(exc.type, exc.detail)
    order.server_refusals = [
        *(order.server_refusals or []),
        {
            "server": endpoint.server,
            "index": endpoint.index,
            "reason": reason,
            "at": now.isoformat(),
        },
    ]
    order.create_attempted_at = None
    order.save(update_fields=["server_refusals", "create_attempted_at", "updated_at"])
    refused = {str(r.get("server")) for r in order.server_refusals}
    left = [e for e in endpoints(order.issuer) if e.server not in refused]
    if left:
        _event(
            order,
            "ServerRefused",
            f"{endpoint.label} refused the order ({reason}); trying {left[0].label}",
            Event.WARNING,
        )
    return bool(left)


def clear_attempt(order: Order, endpoint: Endpoint, why: str) -> None:
    """The newOrder created nothing (see created_nothing): forget the attempt, so the next
    choice is free to go elsewhere (the server's record says why it is skipped)."""
    order.create_attempted_at = None
    order.save(update_fields=["create_attempted_at", "updated_at"])
    _event(order, "ServerSkipped", f"{endpoint.label} did not take the order: {why}", Event.WARNING)


def store_choice(order: Order, choice: Choice) -> None:
    """The chosen server and the attempt, in one write before newOrder."""
    order.server = choice.endpoint.server
    order.server_index = choice.endpoint.index
    order.create_attempted_at = timezone.now()
    order.save(update_fields=["server", "server_index", "create_attempted_at", "updated_at"])
    if choice.endpoint.index > 0 and choice.skipped:
        _event(
            order,
            "FallbackServer",
            f"Ordering from {choice.endpoint.label}: {'; '.join(choice.skipped)}",
            Event.WARNING,
        )


def issued_by_text(order: Order) -> str:
    """`Issued by <server>` (+ ` (fallback n)`), for the timeline."""
    server = order.server or str(order.issuer.kind_spec.get("server") or "")
    suffix = f" (fallback {order.server_index})" if order.server_index else ""
    return f"Issued by {server}{suffix}"


def with_issued_by(certificates: QuerySet[Certificate]) -> QuerySet[Certificate]:
    """Annotate each certificate with its newest valid ACME order's server (`issued_server`,
    the issuer's first server for rows from before fallbacks), `issued_index` and
    `issued_order` (None when none): a list page costs no query per certificate."""
    newest = Order.objects.filter(
        request__certificate=OuterRef("pk"), state=OrderState.VALID
    ).order_by("-created_at", "-id")
    server = Coalesce(
        NullIf("server", Value("")),
        KeyTextTransform("server", KeyTransform("acme", "issuer__spec")),
        output_field=CharField(),
    )
    return certificates.annotate(
        issued_server=Subquery(newest.annotate(issuing_server=server).values("issuing_server")[:1]),
        issued_index=Subquery(newest.values("server_index")[:1]),
        issued_order=Subquery(newest.values("name")[:1]),
    )


def issued_by_many(certificate_ids: list[int]) -> dict[int, dict[str, Any]]:
    """{certificate id: {server, fallback, order}} of each one's newest valid ACME order."""
    if not certificate_ids:
        return {}
    rows = (
        Order.objects.filter(request__certificate_id__in=certificate_ids, state=OrderState.VALID)
        .order_by("created_at", "id")
        .values_list("request__certificate_id", "name", "server", "server_index", "issuer__spec")
    )
    out: dict[int, dict[str, Any]] = {}
    for cert_id, name, server, index, spec in rows:
        # "" is the first server (rows from before fallbacks); the newest order wins.
        url = server or str(((spec or {}).get("acme") or {}).get("server") or "")
        out[cert_id] = {"server": url, "fallback": index, "order": name}
    return out


def _event(order: Order, reason: str, message: str, type_: str = Event.NORMAL) -> None:
    events.record_on(order, reason, message, type_)
