"""A QuerySet compiled once and then run with new parameters (`CompiledQuery`, `compiled`).

Every reconcile starts by loading its row with `select_related`; compiling that query costs
Django about as much CPU as running it (~0.7 ms for a Challenge with its Order, request,
Certificate and Issuer), and a certificate takes ~18 reconciles. The statement only differs
in its parameters, so it is compiled once per thread and query and then run with new
parameters; rows become model instances exactly as QuerySet iteration makes them
(django.db.models.query.ModelIterable: converters, from_db, related populators). Used by the
worker's row loads (issuance/worker/load.py), the certificate controller's view of its
Secret and requests, and the API token lookup.

Measured (docs/decisions/0004-bypasses.md): plain QuerySet loads cost the worker 15.8 ms
more per certificate, 61 % of its CPU (the largest saving). It becomes unnecessary if Django
caches compiled SELECTs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]


class CompiledQuery:
    """A QuerySet compiled once with stand-in values, then run with real ones.

    `build(*stand_ins)` makes the QuerySet; every parameter equal to a stand-in is replaced
    by the matching real value on each run. Compilers hold their thread's connection: keep
    one instance per thread (`compiled()` does).
    """

    def __init__(self, queryset: QuerySet[Any], stand_ins: Sequence[Any]) -> None:
        self.db = queryset.db
        self.compiler = queryset.query.get_compiler(using=self.db)
        sql, params = self.compiler.as_sql()
        self.sql = sql
        self.params = list(params)
        self.slots = [[i for i, p in enumerate(self.params) if p == s] for s in stand_ins]
        if not all(self.slots):
            raise ValueError(f"a stand-in value is not a parameter of {sql}")
        select, klass_info = self.compiler.select, self.compiler.klass_info
        assert klass_info is not None
        self.model_cls: type[Model] = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in select[self.start : self.end]]
        self.populators = get_related_populators(klass_info, select, self.db)
        # The column converters (JSON, datetimes, …), worked out once: Django's results_iter
        # works them out again for every fetch, comparing every selected field (a select of
        # five joined models: most of a row load's CPU).
        self.converters = self.compiler.get_converters(
            [s[0] for s in select[0 : self.compiler.col_count]]
        )

    def fetch(self, *values: Any) -> list[Model]:
        params = list(self.params)
        for slots, value in zip(self.slots, values, strict=True):
            for i in slots:
                params[i] = value
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        found = []
        converted = (
            self.compiler.apply_converters(rows, self.converters) if self.converters else rows
        )
        for row in converted:
            obj = self.model_cls.from_db(self.db, self.init_list, row[self.start : self.end])
            for populator in self.populators:
                populator.populate(row, obj)
            found.append(obj)
        return found


_compiled = threading.local()


def compiled(key: str, build: Callable[..., QuerySet[Any]], *stand_ins: Any) -> CompiledQuery:
    """This thread's CompiledQuery for `key` (built from `build(*stand_ins)` the first time)."""
    cache: dict[str, CompiledQuery] | None = getattr(_compiled, "cache", None)
    if cache is None:
        cache = _compiled.cache = {}
    query = cache.get(key)
    if query is None:
        query = cache[key] = CompiledQuery(build(*stand_ins), stand_ins)
    return query
