"""The Challenges of an Order: one per pending authorization, planned from the issuer's
solvers and the CA's offer, inserted idempotently (the orders controller calls
`ensure_challenges` after reading the authorizations)."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from django.db import IntegrityError

from issuance.acme.protocol.client import AcmeClient
from issuance.acme.solvers.selection import HTTP01, describe_no_solver, select_solver
from issuance.controllers import scheduler
from issuance.controllers.dbutil import guarded
from issuance.models import (
    Challenge,
    ChallengeState,
    Order,
    certificate_labels_of,
    certificate_name_of,
)
from issuance.observability import events
from issuance.shapes import ChallengeSpec, OrderAuthorization, SolverSpec


def ensure_challenges(order: Order, client: AcmeClient, existing: set[str] | None = None) -> str:
    """One Challenge per pending authorization (idempotent). Returns a problem or "".

    `existing`: the authorization URLs that have a Challenge, when the caller read them.
    """
    solvers = list(order.issuer.acme_spec.get("solvers") or [])
    if existing is None:
        existing = set(order.challenges.values_list("authorization_url", flat=True))
    for authz in order.typed_authorizations:
        if authz["status"] != "pending" or authz["url"] in existing:
            continue
        planned = _plan_challenge(order, client, solvers, authz)
        if isinstance(planned, str):
            return planned
        _create_challenge(order, planned)
    return ""


class _NewChallenge(NamedTuple):
    name: str
    dns_name: str
    wildcard: bool
    type: str
    token: str
    spec: ChallengeSpec
    state: str


def _plan_challenge(
    order: Order, client: AcmeClient, solvers: list[SolverSpec], authz: OrderAuthorization
) -> _NewChallenge | str:
    """The Challenge that answers one pending authorization: the solver chosen for its
    name, the CA's challenge of that solver's type, and the key it needs; or the problem
    that makes the order fail (no solver, or the CA offers no such challenge)."""
    name, wildcard = authz["identifier"], bool(authz["wildcard"])
    choice = select_solver(solvers, name, wildcard, certificate_labels_of(order))
    if choice is None:
        return describe_no_solver(name, wildcard)
    offered = [c for c in authz["challenges"] if c.get("type") == choice.challenge_type]
    if not offered:
        types = ", ".join(str(c.get("type")) for c in authz["challenges"])
        return f"the CA offers no {choice.challenge_type} challenge for {name} (only {types})"
    acme_chal = offered[0]
    token = str(acme_chal.get("token") or "")
    # As cert-manager: HTTP-01 key = key authorization; DNS-01 key = the TXT value.
    key = (
        client.key_authorization(token)
        if choice.challenge_type == HTTP01
        else client.dns01_txt_value(token)
    )
    spec: ChallengeSpec = {
        "authorizationURL": authz["url"],
        "url": str(acme_chal.get("url") or ""),
        "dnsName": name,
        "wildcard": wildcard,
        "type": choice.challenge_type,
        "token": token,
        "key": key,
        "solver": choice.solver,
        "issuerRef": order.typed_spec.get("issuerRef") or {"name": order.issuer.name},
    }
    return _NewChallenge(
        name=_challenge_name(order, authz["url"]),
        dns_name=name,
        wildcard=wildcard,
        type=choice.challenge_type,
        token=token,
        spec=spec,
        # The authorization was read a moment ago: a pending challenge needs no sync with
        # the CA before it is presented (unless it waits long in the queue).
        state=ChallengeState.PENDING if acme_chal.get("status") == "pending" else "",
    )


def _create_challenge(order: Order, new: _NewChallenge) -> None:
    """Insert it (queued), unless an earlier, interrupted pass did; tell the scheduler and
    the timeline."""
    try:
        with guarded():
            Challenge.objects.create(
                name=new.name,
                order=order,
                issuer=order.issuer,
                dns_name=new.dns_name,
                type=new.type,
                authorization_url=new.spec["authorizationURL"],
                token=new.token,
                spec=new.spec,
                state=new.state,
            )
        created = True
    except IntegrityError:
        # Made by an earlier, interrupted run; one whose insert committed as the database
        # went away never recorded it: recorded now.
        created = False
    if created:
        scheduler.mark_queue_changed()  # the scheduler may start it at once
    (events.record if created else events.record_if_missing)(
        "Challenge",
        new.name,
        "Created",
        f"Created {new.type} challenge for {'*.' if new.wildcard else ''}{new.dns_name} (queued)",
        certificate_name=certificate_name_of(order),
    )


def _challenge_name(order: Order, authz_url: str) -> str:
    digest = hashlib.sha256(authz_url.encode()).hexdigest()[:10]
    return f"{order.name[: 253 - 11]}-{digest}"
