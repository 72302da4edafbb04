"""Orders controller (ACME). Placeholder until the ACME work lands."""

from __future__ import annotations

from issuance.controllers.base import PermanentError, Result
from issuance.models import Order


def reconcile(order: Order) -> Result:
    raise PermanentError("ACME orders are not implemented yet")
