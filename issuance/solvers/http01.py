"""HTTP-01 solver: the token is answered from the database by the web app or http01_solver.

Presenting is the `presented` flag on the row (set by the controller); cleanup is clearing
it. Only a presented, unfinished http-01 challenge answers, so a finished or timed-out one
stops answering at once even before its cleanup step runs.
"""

from __future__ import annotations

import re
from typing import Any

from issuance.models import Challenge, ChallengeType
from issuance.solvers.selfcheck import check_http01

# RFC 8555 tokens are base64url; anything else cannot be ours (and never hits the database).
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
PATH_PREFIX = "/.well-known/acme-challenge/"


def key_authorization_for(token: str) -> str | None:
    """The key authorization to serve for `token`, or None (→ 404)."""
    if not TOKEN_RE.match(token):
        return None
    spec = (
        Challenge.objects.filter(
            token=token, type=ChallengeType.HTTP01, presented=True, finished=False
        )
        .values_list("spec", flat=True)
        .first()
    )
    if not isinstance(spec, dict):
        return None
    key = spec.get("key")
    return str(key) if key else None


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
