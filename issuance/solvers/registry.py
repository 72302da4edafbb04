"""Which solver handles a challenge, from the solver config copied onto it."""

from __future__ import annotations

from typing import Any

from issuance.models import Challenge, ChallengeType
from issuance.solvers.base import Solver, SolverConfigError
from issuance.solvers.http01 import Http01Solver
from issuance.solvers.lexicon_dns import solver_for_dns01
from issuance.solvers.rfc2136 import Rfc2136Solver
from issuance.solvers.webhook import WebhookSolver


def _section(config: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = config.get(key)
    return dict(value) if isinstance(value, dict) else None


def solver_for(challenge: Challenge) -> Solver:
    config = challenge.spec.get("solver") or {}
    if not isinstance(config, dict):
        raise SolverConfigError("spec.solver must be an object")
    if challenge.type == ChallengeType.HTTP01:
        return Http01Solver(_section(config, "http01") or {})
    dns01 = _section(config, "dns01")
    if dns01 is None:
        raise SolverConfigError("dns-01 challenge without a dns01 solver config")
    rfc2136 = _section(dns01, "rfc2136")
    if rfc2136 is not None:
        return Rfc2136Solver(rfc2136)
    webhook = _section(dns01, "webhook")
    if webhook is not None:
        return WebhookSolver(webhook)
    lexicon = solver_for_dns01(dns01)
    if lexicon is not None:
        return lexicon
    raise SolverConfigError("dns01 solver needs a provider: rfc2136, webhook or lexicon")
