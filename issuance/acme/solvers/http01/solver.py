"""HTTP-01 solver: the token is answered from the database by the web app or http01_solver.

Presenting is the `presented` flag on the row (set by the controller); cleanup is clearing
it. Only a presented, unfinished http-01 challenge answers, so a finished or timed-out one
stops answering at once even before its cleanup step runs.

While the database cannot be reached, a token this process answered (or presented) lately
is answered from memory (RecentAnswers), so a CA validating during an outage still gets
its answer. The memory is only a fallback: whenever the database answers, it decides.

The lookup itself is compiled once (issuance/fastpaths/http01_lookup.py says why).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError

from issuance.acme.solvers.selfcheck import check_http01
from issuance.availability import DatabaseUnavailable, availability, is_unavailable_error
from issuance.fastpaths.http01_lookup import presented_key
from issuance.models import Challenge
from issuance.shapes import Http01Spec

# RFC 8555 tokens are base64url; anything else cannot be ours (and never hits the database).
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
PATH_PREFIX = "/.well-known/acme-challenge/"


class RecentAnswers:
    """Key authorizations this process answered or presented lately, by token.

    Filled by every lookup the database answers (and by present() when the worker runs in
    this process); a token the database no longer answers, or cleaned up here, is
    forgotten at once. Entries also expire after CHALLENGE_PROCESSING_TIMEOUT (a challenge
    is over by then) and the oldest go first beyond `max_entries`.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, token: str, key: str) -> None:
        expires = time.monotonic() + settings.CHALLENGE_PROCESSING_TIMEOUT.total_seconds()
        with self._lock:
            self._entries[token] = (key, expires)
            self._entries.move_to_end(token)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, token: str) -> None:
        with self._lock:
            self._entries.pop(token, None)

    def recall(self, token: str) -> str | None:
        with self._lock:
            entry = self._entries.get(token)
            if entry is None:
                return None
            if entry[1] <= time.monotonic():
                del self._entries[token]
                return None
            return entry[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


recent_answers = RecentAnswers()


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    key: str | None = None
    error: BaseException | None = None


_flights: dict[str, _Flight] = {}
_flights_lock = threading.Lock()


def _shared_query(token: str) -> str | None:
    """Single flight: a CA fetches each token from several places at once, so a lookup that
    starts while another for the same token is running waits for that one's answer instead
    of querying again. Nothing is kept once the query returns: the next request asks the
    database, so a cleaned-up token stops answering at once.
    """
    with _flights_lock:
        flight = _flights.get(token)
        leader = flight is None
        if flight is None:
            flight = _flights[token] = _Flight()
    if not leader:
        flight.done.wait()
        if flight.ok:
            return flight.key
        if flight.error is not None and is_unavailable_error(flight.error):
            raise DatabaseUnavailable(str(flight.error)) from flight.error
        # The leader's query failed otherwise (its caller got the error): ask for ourselves.
        return presented_key(token)
    try:
        flight.key = presented_key(token)
        flight.ok = True
        return flight.key
    except BaseException as exc:
        flight.error = exc
        raise
    finally:
        with _flights_lock:
            del _flights[token]
        flight.done.set()


def key_authorization_for(token: str) -> str | None:
    """The key authorization to serve for `token`, or None (→ 404).

    From the database; while it cannot be reached, from the memory of recent answers, and
    DatabaseUnavailable (→ 503) for a token not in it. While the process knows the
    database is down (issuance.availability), the memory answers at once.
    """
    if not TOKEN_RE.match(token):
        return None
    if not availability.usable():
        return _recall(token, None)
    try:
        key = _shared_query(token)
    except DatabaseError as exc:
        if not is_unavailable_error(exc):
            raise
        availability.failed(exc)
        return _recall(token, exc)
    except DatabaseUnavailable as exc:
        return _recall(token, exc)
    if key is None:
        recent_answers.forget(token)
    else:
        recent_answers.remember(token, key)
    return key


def _recall(token: str, cause: BaseException | None) -> str:
    key = recent_answers.recall(token)
    if key is None:
        raise DatabaseUnavailable(
            f"cannot look up token {token}: the database is unavailable"
        ) from cause
    return key


class Http01Solver:
    name = "http01"
    cleanup_in_database = True

    def __init__(self, config: Http01Spec) -> None:
        # cert-manager's http01 options (ingress, gatewayHTTPRoute) have no meaning here;
        # kept so the copied config round-trips.
        self.config = config

    def present(self, challenge: Challenge) -> None:
        """The controller's presented=True makes it answer. Remembered here too, for when the
        web app runs in this process (`manage.py serve`) and the database becomes unavailable
        before the CA's first fetch."""
        if challenge.token and challenge.key_authorization:
            recent_answers.remember(challenge.token, challenge.key_authorization)

    def cleanup(self, challenge: Challenge) -> None:
        """The controller's presented=False stops it; forgotten here (this process) at once."""
        recent_answers.forget(challenge.token)

    def self_check(self, challenge: Challenge) -> str | None:
        return check_http01(challenge.dns_name, challenge.token, challenge.key_authorization)
