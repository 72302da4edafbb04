"""Shared parts of every resource: name/spec/status split, immutability, work-queue fields."""

from __future__ import annotations

import copy
import re
from collections.abc import Collection
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar, Unpack, cast

from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, models
from django.utils import timezone

from issuance.fastpaths.model_save import insert_instead, update_fields_save
from issuance.shapes import Condition, ConditionExtra

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def validate_resource_name(value: str) -> None:
    """Kubernetes object names (RFC 1123 subdomain), so manifests can be applied unchanged."""
    if not NAME_RE.fullmatch(value or ""):  # match() would let a trailing newline through
        raise ValidationError(
            "must be lowercase letters, digits, '-' or '.', start and end with a letter or "
            "digit, and be at most 253 characters",
            code="invalid_name",
        )


class ImmutableSpecError(Exception):
    """Raised when code tries to change the spec of an immutable resource."""

    def __init__(self, model: str, name: str, fields: list[str]) -> None:
        self.model = model
        self.name = name
        self.fields = fields
        super().__init__(
            f"{model} {name!r}: spec is immutable (tried to change {', '.join(fields)})"
        )


_M = TypeVar("_M", bound=models.Model)


class ImmutableQuerySet(models.QuerySet[_M]):
    """Refuses bulk updates of immutable columns: `.update(spec=…)` is an error, not a bypass."""

    def update(self, **kwargs: Any) -> int:
        frozen = getattr(self.model, "IMMUTABLE_FIELDS", ())
        touched = sorted(k for k in kwargs if k in frozen)
        if touched:
            raise ImmutableSpecError(self.model.__name__, "*", touched)
        return super().update(**kwargs)


class Resource(models.Model):
    """A named object with a spec (asked) and a status (observed), like a Kubernetes object."""

    name = models.CharField(max_length=253, unique=True, validators=[validate_resource_name])
    spec = models.JSONField(default=dict)
    conditions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    KIND: ClassVar[str] = ""

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.KIND or type(self).__name__}/{self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if (
            update_fields is not None
            and not args
            and set(kwargs) <= {"update_fields", "using"}
            and update_fields_save(
                self, update_fields, kwargs.get("using") or self._state.db or DEFAULT_DB_ALIAS
            )
        ):
            return
        if insert_instead(self, args, kwargs):  # a new row: one precompiled INSERT
            return
        super().save(*args, **kwargs)

    # -- conditions ---------------------------------------------------------
    @property
    def typed_conditions(self) -> list[Condition]:
        """The `conditions` column as what set_condition writes (the one cast)."""
        return cast(list[Condition], self.conditions or [])

    def get_condition(self, type_: str) -> Condition | None:
        for cond in self.typed_conditions:
            if cond.get("type") == type_:
                return cond.copy()
        return None

    def condition_is(self, type_: str, status: str = "True") -> bool:
        cond = self.get_condition(type_)
        return bool(cond and cond.get("status") == status)

    def set_condition(
        self,
        type_: str,
        status: str,
        reason: str = "",
        message: str = "",
        now: datetime | None = None,
        **extra: Unpack[ConditionExtra],
    ) -> bool:
        """Set a condition; lastTransitionTime changes only when status changes. Returns changed."""
        now = now or timezone.now()
        conds = [c.copy() for c in self.typed_conditions]
        for index, cond in enumerate(conds):
            if cond.get("type") == type_:
                new = cond.copy()
                if cond.get("status") != status:
                    new["lastTransitionTime"] = now.isoformat()
                new = {**new, "status": status, "reason": reason, "message": message, **extra}
                if new == cond:
                    return False
                conds[index] = new
                self.conditions = conds
                return True
        conds.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now.isoformat(),
                **extra,
            }
        )
        self.conditions = conds
        return True

    def remove_condition(self, type_: str) -> bool:
        conds = [c for c in self.typed_conditions if c.get("type") != type_]
        changed = len(conds) != len(self.conditions or [])
        self.conditions = conds
        return changed


def _snapshot(value: Any) -> Any:
    """A deep copy of a JSON-like value (what spec columns hold) for the immutability check.

    Taken on every load of every immutable row (the worker loads Orders and requests with
    each Challenge); copy.deepcopy's generality made it a visible share of the worker's CPU.
    """
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if isinstance(value, str | int | float | bool | None):
        return value
    return copy.deepcopy(value)


class ImmutableSpecMixin(models.Model):
    """Spec (and the columns derived from it) cannot change once the row exists."""

    IMMUTABLE_FIELDS: ClassVar[tuple[str, ...]] = ("spec",)
    _original: dict[str, Any]

    objects = ImmutableQuerySet[Any].as_manager()

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db: str | None, field_names: Collection[str], values: Collection[Any]) -> Self:
        instance = super().from_db(db, field_names, values)
        instance._original = {
            f: _snapshot(instance.__dict__[f])
            for f in cls._immutable_attnames()
            if f in instance.__dict__
        }
        return instance

    @classmethod
    def _immutable_attnames(cls) -> list[str]:
        return [cls._meta.get_field(f).attname for f in cls.IMMUTABLE_FIELDS]  # type: ignore[union-attr]

    def save(self, *args: Any, **kwargs: Any) -> None:
        original = getattr(self, "_original", None)
        if self.pk is not None and original is not None:
            update_fields = kwargs.get("update_fields")
            changed = [
                f
                for f in self._immutable_attnames()
                if f in original
                and self.__dict__.get(f) != original[f]
                and (
                    update_fields is None
                    or f in update_fields
                    or f.removesuffix("_id") in update_fields
                )
            ]
            if changed:
                raise ImmutableSpecError(type(self).__name__, getattr(self, "name", "?"), changed)
        super().save(*args, **kwargs)
        self._original = {f: _snapshot(self.__dict__.get(f)) for f in self._immutable_attnames()}


class Reconciled(models.Model):
    """Work-queue columns: when the worker should look again and who holds the lease."""

    due_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    # Bumped by anyone who wants a fresh look while a worker may hold the lease, so the
    # worker's "next look" does not overwrite the wake-up.
    wake_seq = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        abstract = True
        indexes = [
            models.Index(
                fields=["due_at"],
                name="%(class)s_due",
                condition=models.Q(due_at__isnull=False),
            )
        ]
