"""The ACME client's record of each CA, kept in the database (AcmeServer rows) for all
workers: pauses the CA asked for (ratelimit), reachability (health), request counts
(/metrics)."""

from __future__ import annotations

from datetime import datetime, timedelta

from issuance.acme import health, ratelimit
from issuance.observability.metrics import ACME_REQUESTS, ACME_SERVER_REQUESTS


class DatabaseRecord:
    """issuance.acme.protocol.exchange.CaRecord over the AcmeServer rows."""

    def before_request(self, directory_url: str) -> bool:
        ratelimit.check_not_paused(directory_url)
        return health.gate(directory_url)

    def no_answer(self, directory_url: str, error: str, *, probe: bool) -> Exception:
        return health.record_failure(directory_url, error, probe=probe)

    def answered(self, directory_url: str, *, probe: bool) -> None:
        health.record_answer(directory_url, probe=probe)

    def paused(self, directory_url: str, retry_after: timedelta | None, reason: str) -> datetime:
        return ratelimit.record_pause(directory_url, retry_after, reason)

    def counted(self, directory_url: str, action: str, result: str) -> None:
        ACME_REQUESTS.labels(action=action, result=result).inc()
        ACME_SERVER_REQUESTS.labels(server=directory_url, result=result).inc()


DATABASE_RECORD = DatabaseRecord()
