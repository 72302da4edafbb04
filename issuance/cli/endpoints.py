"""`certctl endpoints`: a certificate's endpoints as a table, and probing them now from the
command line (the same probe and the same stored record as the worker's)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.utils import timezone

from issuance.models import Certificate, Endpoint
from issuance.probing import runner
from issuance.probing.deployment import deployment, state_of
from issuance.probing.known import known_of


def probe_all(cert: Certificate) -> None:
    """Probe every endpoint of the certificate now: the network on PROBE_CONCURRENCY
    threads, the database from this thread only (the rows read before, the results stored
    after)."""
    rows = list(cert.endpoints.select_related("certificate"))
    if not rows:
        return
    known = known_of(cert)
    with ThreadPoolExecutor(max(1, min(settings.PROBE_CONCURRENCY, len(rows)))) as pool:
        records = list(pool.map(lambda e: runner.probe(e, known), rows))
    for endpoint, record in zip(rows, records, strict=True):
        runner.store(endpoint, record, None)


def table(cert: Certificate, rows: Iterable[Endpoint]) -> str:
    rows = list(rows)
    now = timezone.now()
    summary = deployment(rows, now)
    if summary is None:
        return f"Certificate {cert.name} has no endpoints."
    lines = [
        f"Certificate {cert.name} (revision {cert.revision}): {summary['state']}, "
        f"{summary['current']} of {summary['endpoints']} "
        f"endpoint{'s' if summary['endpoints'] != 1 else ''} "
        f"serve{'s' if summary['current'] == 1 else ''} the current revision",
        f"{'ID':>5}  {'ENDPOINT':<36} {'PROTOCOL':<8} {'STATE':<12} {'REVISION':<8} "
        f"{'CHAIN':<6} {'HOST':<5} DETAIL",
    ]
    for e in rows:
        probe = e.typed_last_probe
        chain = host = "-"
        detail = "not probed yet"
        if probe is not None:
            chain = "ok" if probe["chainVerified"] else "no"
            host = "ok" if probe["hostnameMatch"] else "no"
            detail = probe["error"] or probe["chainError"] or f"{probe['tlsVersion']}"
            if probe["match"] == "error":
                chain = host = "-"
        revision = str(e.served_revision) if e.served_revision is not None else "-"
        lines.append(
            f"{e.pk:>5}  {e.address:<36} {e.protocol:<8} {state_of(e, now):<12} "
            f"{revision:<8} {chain:<6} {host:<5} {detail}"
        )
    return "\n".join(lines)
