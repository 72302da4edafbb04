"""Small database helpers shared by the controllers."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction


def guarded(using: str = DEFAULT_DB_ALIAS) -> AbstractContextManager[Any]:
    """Around one statement that may fail (an INSERT of a name that may be taken).

    Inside a caller's transaction: a savepoint, so the failure does not spoil the rest of
    it. In autocommit mode the statement is its own transaction already, and atomic() would
    add a BEGIN and a COMMIT round trip for nothing.
    """
    if connections[using].in_atomic_block:
        return transaction.atomic(using=using)
    return contextlib.nullcontext()
