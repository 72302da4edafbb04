"""Challenges controller (ACME). Placeholder until the ACME work lands."""

from __future__ import annotations

from issuance.controllers.base import PermanentError, Result
from issuance.models import Challenge


def reconcile(challenge: Challenge) -> Result:
    raise PermanentError("ACME challenges are not implemented yet")
