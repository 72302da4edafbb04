"""`save(update_fields=[…])` of a resource without Django's per-call query compilation.

Status writes are the worker's most frequent statement (~15 per certificate), and for
each one Django builds and compiles an UPDATE query anew, which cost more CPU than the
database spends running it. The statement only depends on the model and the field names,
so it is built once; values go through the same field methods as in Model.save (pre_save
for auto_now, get_db_prep_save), the same signals are sent, and an UPDATE that matches no
row raises the same DatabaseError.

Measured (docs/decisions/0004-bypasses.md): the plain `Model.save` path costs the worker 4.8
ms more per certificate, 19 % of its CPU (25.7 ms per ECDSA certificate, N=1000). It becomes
unnecessary if Django caches compiled UPDATEs for `save(update_fields=…)`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Protocol

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.signals import post_save, pre_save

_Statement = tuple[str, list[Field[Any, Any]], list[Field[Any, Any]]]
_statements: dict[tuple[type[Model], str, frozenset[str], tuple[str, ...]], _Statement] = {}
_lock = threading.Lock()


def _statement(
    model: type[Model],
    connection: BaseDatabaseWrapper,
    names: frozenset[str],
    conditions: tuple[str, ...] = (),
) -> _Statement | None:
    """UPDATE … SET <names> WHERE pk = %s [AND <condition> = %s …], built once."""
    key = (model, connection.vendor, names, conditions)
    found = _statements.get(key)
    if found is not None:
        return found
    meta = model._meta
    pk = meta.pk
    by_name: dict[str, Field[Any, Any]] = {}
    for concrete in meta.local_concrete_fields:
        by_name[concrete.name] = concrete
        by_name[concrete.attname] = concrete
    fields = []
    for name in sorted(names):
        field = by_name.get(name)
        if field is None or field is pk or field.primary_key:
            return None  # Model.save explains the mistake
        fields.append(field)
    checked = []
    for name in conditions:
        field = by_name.get(name)
        if field is None:
            return None
        checked.append(field)
    quote = connection.ops.quote_name
    # Only quoted names from the model's metadata go into the text; every value is a parameter.
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    where = " AND ".join(
        [f"{quote(pk.column)} = %s"] + [f"{quote(f.column)} = %s" for f in checked]
    )
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {where}"  # noqa: S608
    with _lock:
        _statements[key] = (sql, fields, checked)
    return sql, fields, checked


def _run(
    instance: Model,
    statement: _Statement,
    connection: BaseDatabaseWrapper,
    condition_values: tuple[Any, ...] = (),
) -> int:
    with connection.cursor() as cursor:
        cursor.execute(statement[0], _params(instance, statement, connection, condition_values))
        return int(cursor.rowcount)


def _params(
    instance: Model,
    statement: _Statement,
    connection: BaseDatabaseWrapper,
    condition_values: tuple[Any, ...],
) -> list[Any]:
    """The statement's values: the fields as Model.save prepares them, the pk, the conditions."""
    _, fields, checked = statement
    values = [f.get_db_prep_save(f.pre_save(instance, False), connection) for f in fields]
    wanted = [
        f.get_db_prep_value(v, connection) for f, v in zip(checked, condition_values, strict=True)
    ]
    return [*values, instance.pk, *wanted]


def _has_expression(instance: Model, fields: list[Field[Any, Any]]) -> bool:
    return any(hasattr(getattr(instance, f.attname), "resolve_expression") for f in fields)


def _compiled_update(
    instance: Model, names: frozenset[str], using: str, conditions: dict[str, Any]
) -> tuple[str, list[Any]] | None:
    """The precompiled UPDATE … WHERE pk [AND conditions] with this instance's values, or
    None when this path does not apply (unknown names, inherited models, expressions)."""
    model = type(instance)
    if not names or instance.pk is None or model._meta.parents:
        return None
    connection = connections[using]
    statement = _statement(model, connection, names, tuple(conditions))
    if statement is None or _has_expression(instance, statement[1]):
        return None
    return statement[0], _params(instance, statement, connection, tuple(conditions.values()))


def update_where(
    instance: Model, update_fields: Iterable[str], using: str, **conditions: Any
) -> int | None:
    """UPDATE these fields of the row only while it still matches `conditions` (equality);
    the number of rows changed, or None when this path does not apply. Sends no signals
    (like QuerySet.update)."""
    compiled = _compiled_update(instance, frozenset(update_fields), using, conditions)
    if compiled is None:
        return None
    with connections[using].cursor() as cursor:
        cursor.execute(*compiled)
        return int(cursor.rowcount)


def update_fields_save(instance: Model, update_fields: Iterable[str], using: str) -> bool:
    """Save these fields of a stored row with one precompiled UPDATE.

    Returns False when this path does not apply (the caller then uses Model.save).
    """
    model = type(instance)
    names = frozenset(update_fields)
    if not names or instance.pk is None or instance._state.adding or model._meta.parents:
        return False
    connection = connections[using]
    statement = _statement(model, connection, names)
    if statement is None or _has_expression(instance, statement[1]):
        return False  # bad names: Model.save explains; F() and other expressions: it compiles
    pre_save.send(sender=model, instance=instance, raw=False, using=using, update_fields=names)
    if _run(instance, statement, connection) == 0:
        raise DatabaseError("Save with update_fields did not affect any rows.")
    instance._state.db = using
    post_save.send(
        sender=model, instance=instance, created=False, update_fields=names, raw=False, using=using
    )
    return True


class AlsoUpdate(Protocol):
    """A second row's UPDATE that goes with a compare-and-set write, both or neither (the
    worker's wake-up of an owner: issuance.worker.wakeup.Wake). Given by the caller, so
    this module knows nothing of the worker."""

    def sql(self) -> tuple[str, list[Any]]:
        """The UPDATE, to run in the same statement as the write (PostgreSQL)."""

    def run(self) -> None:
        """Run it as its own statement (the caller's transaction holds both)."""

    def done(self) -> None:
        """After `sql()` ran inside the write's statement and the write matched."""


def save_where(
    instance: Model,
    update_fields: Iterable[str],
    using: str,
    *,
    wake: AlsoUpdate | None = None,
    **conditions: Any,
) -> bool:
    """Save these fields only while the row still matches `conditions` (compare-and-set).

    One UPDATE … WHERE pk = %s AND <field> = %s …, with the signals Model.save sends (the
    live updates listen to post_save). Returns False, sending no post_save, when no row
    matched: someone changed the row meanwhile. `wake`: an UPDATE of another row made
    if the row was saved, atomically with it.
    """
    names = frozenset(update_fields)
    pre_save.send(
        sender=type(instance), instance=instance, raw=False, using=using, update_fields=names
    )
    if wake is None:
        saved = _update_or_orm(instance, names, using, conditions)
    else:
        woke = None
        if connections[using].vendor == "postgresql":
            woke = _update_and_wake(instance, names, using, wake, conditions)
        if woke is None:  # two statements in a transaction
            with transaction.atomic(using=using):
                saved = _update_or_orm(instance, names, using, conditions)
                if saved:
                    wake.run()
        else:
            saved = bool(woke)
            if saved:
                wake.done()
    if not saved:
        return False
    instance._state.db = using
    post_save.send(
        sender=type(instance),
        instance=instance,
        created=False,
        update_fields=names,
        raw=False,
        using=using,
    )
    return True


def _update_or_orm(
    instance: Model, names: frozenset[str], using: str, conditions: dict[str, Any]
) -> bool:
    """The conditional UPDATE: precompiled, or the ORM's where that does not apply."""
    saved = update_where(instance, names, using, **conditions)
    if saved is None:
        model = type(instance)
        values = {name: getattr(instance, name) for name in names}
        for field in model._meta.local_concrete_fields:
            if field.name in names and getattr(field, "auto_now", False):
                values[field.name] = field.pre_save(instance, False)
        saved = (
            model._default_manager.using(using)
            .filter(pk=instance.pk, **conditions)
            .update(**values)
        )
    return bool(saved)


def _update_and_wake(
    instance: Model,
    names: frozenset[str],
    using: str,
    wake: AlsoUpdate,
    conditions: dict[str, Any],
) -> int | None:
    """PostgreSQL: the compare-and-set UPDATE and the wake-up in one statement (a
    data-modifying WITH; the wake-up only if the row matched), instead of a transaction of
    two: BEGIN, UPDATE, UPDATE, COMMIT. None when the precompiled UPDATE does not apply."""
    compiled = _compiled_update(instance, names, using, conditions)
    if compiled is None:
        return None
    sql, params = compiled
    wake_update, wake_params = wake.sql()
    combined = (
        f"WITH u AS ({sql} RETURNING 1),"  # noqa: S608 - texts built from model metadata
        f" w AS ({wake_update} AND EXISTS (SELECT 1 FROM u)) SELECT count(*) FROM u"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(combined, [*params, *wake_params])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


_inserts: dict[tuple[type[Model], str], tuple[str, list[Field[Any, Any]]]] = {}


def _insert_statement(
    model: type[Model], connection: BaseDatabaseWrapper
) -> tuple[str, list[Field[Any, Any]]] | None:
    """INSERT INTO … (every column but an auto primary key) VALUES (…) RETURNING pk, built
    once per model; None where this path does not apply (the caller uses Model.save)."""
    key = (model, connection.vendor)
    found = _inserts.get(key)
    if found is not None:
        return found
    meta = model._meta
    pk = meta.pk
    if meta.parents or pk is None or not getattr(pk, "db_returning", False):
        return None
    if not connection.features.can_return_columns_from_insert:
        return None
    fields = [f for f in meta.local_concrete_fields if f is not pk and not f.generated]
    if any(f.has_db_default() for f in fields):  # type: ignore[attr-defined]
        return None
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
        f" RETURNING {quote(pk.column)}"
    )
    with _lock:
        _inserts[key] = (sql, fields)
    return sql, fields


def insert_instead(instance: Model, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """For a model's save(): a plain save of a new row (as objects.create() makes it, with at
    most force_insert and using) done by insert_save. False for any other call, which the
    caller then hands to Model.save."""
    if args or not set(kwargs) <= {"force_insert", "using"}:
        return False
    return insert_save(instance, kwargs.get("using") or DEFAULT_DB_ALIAS)


def insert_save(instance: Model, using: str) -> bool:
    """Insert a new row with one precompiled INSERT (Model.save compiled it anew each time),
    with the signals and checks Model.save has. Returns False when this path does not apply."""
    model = type(instance)
    if not instance._state.adding or instance.pk is not None:
        return False
    connection = connections[using]
    statement = _insert_statement(model, connection)
    if statement is None:
        return False
    sql, fields = statement
    # An expression as a value is the ORM's to compile. Decided before pre_save is sent:
    # falling back to Model.save after it would send it a second time.
    if _has_expression(instance, fields):
        return False
    instance._prepare_related_fields_for_save(operation_name="save")  # type: ignore[attr-defined]
    pre_save.send(sender=model, instance=instance, raw=False, using=using, update_fields=None)
    if _has_expression(instance, fields):
        # A pre_save receiver put one there: the ORM's own INSERT, the signal already sent.
        instance._save_table(raw=False, cls=model, force_insert=True, using=using)  # type: ignore[attr-defined]
    else:
        values = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
        with connection.cursor() as cursor:
            cursor.execute(sql, values)
            row = cursor.fetchone()
        assert row is not None
        instance.pk = row[0]
    instance._state.adding = False
    instance._state.db = using
    post_save.send(
        sender=model, instance=instance, created=True, update_fields=None, raw=False, using=using
    )
    return True
