"""Loading a leased row, with the related rows its reconcile reads, by a query compiled
once per thread and controller (issuance/fastpaths/compiled_query.py says why and what it
saves)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from django.db.models import Model

from issuance.fastpaths.compiled_query import CompiledQuery

# A primary key no row has; its position in the compiled parameters is where the real one goes.
_SENTINEL_PK = -7_319_000_000_001


class RowLoader(CompiledQuery):
    """Loads `model` rows leased by `owner`, with `related` (select_related paths)."""

    def __init__(self, model: type[Model], related: Sequence[str], owner: str) -> None:
        queryset = model._default_manager.filter(pk=_SENTINEL_PK, lease_owner=owner)
        super().__init__(queryset.select_related(*related).order_by(), [_SENTINEL_PK])

    def load(self, pk: Any) -> Model | None:
        rows = self.fetch(pk)
        return rows[0] if rows else None


class Loaders:
    """One RowLoader per (thread, model): compilers hold their thread's connection."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._local = threading.local()

    def load(self, model: type[Model], related: Sequence[str], pk: Any) -> Model | None:
        cache: dict[tuple[type[Model], tuple[str, ...]], RowLoader] | None = getattr(
            self._local, "cache", None
        )
        if cache is None:
            cache = self._local.cache = {}
        key = (model, tuple(related))
        loader = cache.get(key)
        if loader is None:
            loader = cache[key] = RowLoader(model, related, self.owner)
        return loader.load(pk)
