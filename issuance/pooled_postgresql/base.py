"""Django's PostgreSQL backend, except that a pool timeout means "no database" only when
the database refuses a connection too.

The pool's timeout (DATABASE_POOL_TIMEOUT, 1 s) bounds how long a request waits before it
answers 503 in an outage (issuance.availability). But the pool also times out with the
database up: after an idle spell a burst of requests waits while the pool opens its
connections one at a time, and on a loaded machine opening one can take longer than the
whole timeout; with every connection busy, a request waits for one to come back. Those
requests answered 503 and marked the database down for the whole process (30 requests to a
healthy server, six at a time, on a machine with a load of 15: tests/e2e/test_pg_outage_web.py).

So on a timeout the caller opens a connection of its own, beside the pool with its
parameters (as the availability prober does): refused or unreachable, the timeout stands
and the caller answers without the database as before; opened, the database is only busy,
and the caller waits for the pool again, up to BUSY_LIMIT in all. An outage costs the
first request one refused connection more (microseconds; a partitioned host, libpq's
`connect_timeout` more).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db.backends.postgresql import base
from psycopg_pool import PoolTimeout

from issuance.availability import reachable_beside

log = logging.getLogger("issuance.availability")

# Longest a caller waits for a pooled connection while the database answers: a request
# that would otherwise fail with the database up. Django without a pool would wait for
# its own connection as long.
BUSY_LIMIT = 30.0


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        started = time.monotonic()
        while True:
            try:
                return super().get_new_connection(conn_params)
            except PoolTimeout:
                pool: Any = getattr(self, "pool", None)  # Django's, untyped in django-stubs
                if pool is None or time.monotonic() - started >= BUSY_LIMIT:
                    raise
                if not reachable_beside(pool):
                    raise
                log.debug("the pool is busy, the database answers: waiting for the pool again")
