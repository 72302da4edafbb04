"""HTTP-01 solver: the token is answered from the database by the web app or http01_solver.

Presenting is the `presented` flag on the row (set by the controller); cleanup is clearing
it. Only a presented, unfinished http-01 challenge answers, so a finished or timed-out one
stops answering at once even before its cleanup step runs.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from issuance.models import Challenge, ChallengeType
from issuance.solvers.selfcheck import check_http01

# RFC 8555 tokens are base64url; anything else cannot be ours (and never hits the database).
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
PATH_PREFIX = "/.well-known/acme-challenge/"
# Never a token (TOKEN_RE refuses it): marks the token's place in the compiled parameters.
_STAND_IN = "\x00token\x00"


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple[Any, ...]
    slot: int


_statements: dict[str, _Statement] = {}


def _statement(alias: str) -> _Statement:
    """The lookup's SQL, compiled by the ORM once per database (not per request).

    Compiling the QuerySet cost Django more CPU than running it (a py-spy profile of bulk
    issuance: a third of the web process). The SQL is exactly what the QuerySet runs, so
    the semantics (filters, ordering of .first()) stay the ORM's.
    """
    statement = _statements.get(alias)
    if statement is None:
        queryset = Challenge.objects.using(alias).filter(
            token=_STAND_IN, type=ChallengeType.HTTP01, presented=True, finished=False
        )
        query = queryset.values_list("spec", flat=True)[:1].query
        sql, params = query.get_compiler(using=alias).as_sql()
        statement = _statements[alias] = _Statement(sql, tuple(params), params.index(_STAND_IN))
    return statement


def _query(token: str, alias: str = DEFAULT_DB_ALIAS) -> str | None:
    statement = _statement(alias)
    params = list(statement.params)
    params[statement.slot] = token
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    # The ORM's own decoding of the column (JSON text on both PostgreSQL and SQLite).
    spec = Challenge._meta.get_field("spec").from_db_value(row[0], None, connection)  # type: ignore[arg-type]
    if not isinstance(spec, dict):
        return None
    key = spec.get("key")
    return str(key) if key else None


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    key: str | None = None


_flights: dict[str, _Flight] = {}
_flights_lock = threading.Lock()


def key_authorization_for(token: str) -> str | None:
    """The key authorization to serve for `token`, or None (→ 404).

    Single flight: a CA fetches each token from several places at once, so a lookup that
    starts while another for the same token is running waits for that one's answer instead
    of querying again. Nothing is kept once the query returns: the next request asks the
    database, so a cleaned-up token stops answering at once.
    """
    if not TOKEN_RE.match(token):
        return None
    with _flights_lock:
        flight = _flights.get(token)
        leader = flight is None
        if flight is None:
            flight = _flights[token] = _Flight()
    if not leader:
        flight.done.wait()
        # The leader's query failed (its caller got the error): ask for ourselves.
        return flight.key if flight.ok else _query(token)
    try:
        flight.key = _query(token)
        flight.ok = True
        return flight.key
    finally:
        with _flights_lock:
            del _flights[token]
        flight.done.set()


class Http01Solver:
    name = "http01"
    cleanup_in_database = True

    def __init__(self, config: dict[str, Any]) -> None:
        # cert-manager's http01 options (ingress, gatewayHTTPRoute) have no meaning here;
        # kept so the copied config round-trips.
        self.config = config

    def present(self, challenge: Challenge) -> None:
        """Nothing outside the database: the controller's presented=True makes it answer."""

    def cleanup(self, challenge: Challenge) -> None:
        """Nothing outside the database: the controller's presented=False stops it."""

    def self_check(self, challenge: Challenge) -> str | None:
        return check_http01(challenge.dns_name, challenge.token, challenge.key_authorization)
