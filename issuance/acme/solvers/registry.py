"""Which solver handles a challenge, from the solver config copied onto it."""

from __future__ import annotations

from typing import TypeVar

from issuance.acme.solvers.base import Solver, SolverConfigError
from issuance.acme.solvers.http01.solver import Http01Solver
from issuance.acme.solvers.lexicon_dns import solver_for_dns01
from issuance.acme.solvers.rfc2136 import Rfc2136Solver
from issuance.acme.solvers.webhook import WebhookSolver
from issuance.models import Challenge, ChallengeType
from issuance.shapes import Dns01Spec, Http01Spec, Rfc2136Spec, WebhookSpec

_Section = TypeVar("_Section", Http01Spec, Dns01Spec, Rfc2136Spec, WebhookSpec)


def _section(value: _Section | None) -> _Section | None:
    """A copy of one block of the config; None when it is missing or not an object (the
    spec is stored JSON: checked here rather than trusted)."""
    return value.copy() if isinstance(value, dict) else None


def solver_for(challenge: Challenge) -> Solver:
    config = challenge.typed_spec.get("solver") or {}
    if not isinstance(config, dict):
        raise SolverConfigError("spec.solver must be an object")
    if challenge.type == ChallengeType.HTTP01:
        return Http01Solver(_section(config.get("http01")) or {})
    dns01 = _section(config.get("dns01"))
    if dns01 is None:
        raise SolverConfigError("dns-01 challenge without a dns01 solver config")
    rfc2136 = _section(dns01.get("rfc2136"))
    if rfc2136 is not None:
        return Rfc2136Solver(rfc2136)
    webhook = _section(dns01.get("webhook"))
    if webhook is not None:
        return WebhookSolver(webhook)
    lexicon = solver_for_dns01(dns01)
    if lexicon is not None:
        return lexicon
    raise SolverConfigError("dns01 solver needs a provider: rfc2136, webhook or lexicon")
