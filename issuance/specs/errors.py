"""SpecError: every problem of a spec at once, each with the field path it is about."""

from __future__ import annotations

from collections.abc import Iterable


class SpecError(ValueError):
    """A spec is invalid. `errors` is a list of (field path, message), e.g.
    ("spec.dnsNames[1]", "duplicate of spec.dnsNames[0]")."""

    def __init__(self, errors: Iterable[tuple[str, str]]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{path}: {message}" for path, message in self.errors))

    def as_dict(self) -> dict[str, list[str]]:
        """The DRF error shape: {"spec.dnsNames[1]": ["..."]}."""
        out: dict[str, list[str]] = {}
        for path, message in self.errors:
            out.setdefault(path, []).append(message)
        return out


class Errors:
    """Collects problems while a validator walks a spec, so the user sees all of them at once."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def extend(self, other: SpecError) -> None:
        self.items.extend(other.errors)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise SpecError(self.items)
