"""The HTTP-01 token lookup (is this token presented, and with which key authorization),
compiled by the ORM once per database instead of per request.

Compiling the QuerySet cost Django more CPU than running it (a py-spy profile of bulk
issuance: a third of the web process). The SQL is exactly what the QuerySet runs, so the
semantics (filters, the ordering of .first()) stay the ORM's; tests/fastpaths compares the
two.

Measured (docs/decisions/0004-bypasses.md): it saves the web process 1.2 ms per certificate
(23 %). It becomes unnecessary if Django caches compiled SELECTs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from issuance.models import Challenge, ChallengeType

# Never a token (TOKEN_RE refuses it): marks the token's place in the compiled parameters.
_STAND_IN = "\x00token\x00"


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple[Any, ...]
    slot: int


_statements: dict[str, _Statement] = {}


def _statement(alias: str) -> _Statement:
    """The lookup's SQL, compiled by the ORM once per database (not per request)."""
    statement = _statements.get(alias)
    if statement is None:
        queryset = Challenge.objects.using(alias).filter(
            token=_STAND_IN, type=ChallengeType.HTTP01, presented=True, finished=False
        )
        query = queryset.values_list("spec", flat=True)[:1].query
        sql, params = query.get_compiler(using=alias).as_sql()
        statement = _statements[alias] = _Statement(sql, tuple(params), params.index(_STAND_IN))
    return statement


def presented_key(token: str, alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """The key authorization of the presented, unfinished http-01 challenge for `token`."""
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
