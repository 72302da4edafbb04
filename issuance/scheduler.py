"""Challenge scheduler (DESIGN §3). Placeholder until the ACME work lands."""

from __future__ import annotations


def schedule_pass() -> bool:
    return False
