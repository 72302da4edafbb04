"""What an apply did, in kubectl's words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

T = TypeVar("T")


class Outcome(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Applied(Generic[T]):
    obj: T
    outcome: Outcome

    @property
    def created(self) -> bool:
        return self.outcome is Outcome.CREATED


def changed_fields(
    old: Mapping[str, object], new: Mapping[str, object], prefix: str = "spec"
) -> list[str]:
    """Top-level spec fields that differ, for events and immutability errors."""
    keys = sorted(set(old) | set(new))
    return [f"{prefix}.{k}" for k in keys if old.get(k) != new.get(k)]
