"""ARI (RFC 9773) for the certificates controller: when to read the CA's renewalInfo for a
certificate, reading it, and the `replaces` identifier of renewal orders.

The certificates controller calls `poll` in its normal pass when `ari_next_check` is due
and returns Result.after until the next check (never sleeping). The CA's Retry-After says
when to ask again, clamped to 1 h … 24 h (12 h, twice a day, when absent).

Spread: each next check is drawn uniformly from ±10 % of that interval (kept inside the
clamp), with a fresh random draw per poll. A thousand certificates issued in the same
minute, with the same Retry-After, therefore poll spread over 2.4 h of a 12 h interval
instead of at one instant, and each later poll spreads them further (the offsets add up
like a random walk), so no burst at the hour ever forms again.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from issuance.acme import fallback
from issuance.acme.protocol.certs import ari_cert_id
from issuance.acme.protocol.errors import AcmeProblemError
from issuance.controllers.base import TemporaryError
from issuance.models import Certificate, CertificateRequest, Event, Secret
from issuance.observability import events

log = logging.getLogger("issuance.ari")

CHECK_MIN = timedelta(hours=1)
CHECK_MAX = timedelta(hours=24)
CHECK_DEFAULT = timedelta(hours=12)  # "twice a day" without a Retry-After
SPREAD = 0.1  # ± this share of the interval

ARI_FIELDS = (
    "ari_renewal_time",
    "ari_window_start",
    "ari_window_end",
    "ari_checked_at",
    "ari_next_check",
)

_random = secrets.SystemRandom()


def check_interval(retry_after: timedelta | None, draw: float | None = None) -> timedelta:
    """The wait until the next renewalInfo read: Retry-After clamped, then spread ±10 %.

    `draw` in [0, 1) picks the point in the spread (tests pass it; else random)."""
    wanted = CHECK_DEFAULT if retry_after is None else retry_after
    interval = min(max(wanted, CHECK_MIN), CHECK_MAX)
    low = max(interval * (1 - SPREAD), CHECK_MIN)
    high = min(interval * (1 + SPREAD), CHECK_MAX)
    fraction = _random.random() if draw is None else draw
    return low + (high - low) * fraction


def ari_point(name: str, start: datetime, end: datetime) -> datetime:
    """The instant chosen in the CA's window (RFC 9773 §4.2: uniformly at random).

    Drawn from a hash of the certificate's name rather than per poll, so re-reading an
    unchanged window does not move the renewal time around; across certificates the
    points are spread uniformly over the window. A point in the past means "renew now"."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return start + (end - start) * (digest / 2**64)


def clear(cert: Certificate) -> None:
    """Forget the window of the previous certificate (a new revision was stored)."""
    for name in ARI_FIELDS:
        setattr(cert, name, None)


@dataclass(frozen=True)
class Polled:
    """A renewalInfo read; `note` is the event to record once the row is saved (the window
    is new or moved), so a crash before the write records nothing twice."""

    note: tuple[str, str, str] | None = None  # (reason, message, event type)

    def record(self, cert: Certificate) -> None:
        if self.note is not None:
            reason, message, type_ = self.note
            events.record(
                "Certificate", cert.name, reason, message, type_=type_, certificate_name=cert.name
            )


def poll(cert: Certificate, request: CertificateRequest, chain_pem: str, now: datetime) -> Polled:
    """Read the CA's renewalInfo for the current certificate into the ARI fields (not
    saved: the caller writes them with the renewal time that follows from them)."""
    try:
        # Asked of the CA that issued it (CA fallback: not always the issuer's first).
        info = fallback.client_of_request(request).fetch_renewal_info(chain_pem)
    except TemporaryError as exc:
        # CA paused, unreachable or no account yet: ask again after the shortest interval.
        log.info("renewalInfo for %s not read (%s); again in about an hour", cert.name, exc)
        cert.ari_next_check = now + check_interval(CHECK_MIN)
        return Polled()
    except (AcmeProblemError, ValueError) as exc:
        # The CA does not know the certificate, or it has no AKI: keep what we had.
        log.info("renewalInfo for %s refused: %s", cert.name, exc)
        cert.ari_next_check = now + check_interval(None)
        return Polled()
    cert.ari_checked_at = now
    if info is None:  # the CA offers no ARI (anymore): the formula decides
        cert.ari_window_start = cert.ari_window_end = cert.ari_renewal_time = None
        cert.ari_next_check = now + check_interval(CHECK_MAX)
        return Polled()
    cert.ari_next_check = now + check_interval(info.retry_after)
    if info.window is None:
        return Polled()  # an unusable body: keep the last window until the next read
    start, end = info.window
    if (start, end) == (cert.ari_window_start, cert.ari_window_end):
        return Polled()
    moved = cert.ari_window_start is not None
    cert.ari_window_start, cert.ari_window_end = start, end
    cert.ari_renewal_time = ari_point(cert.name, start, end)
    note = f" ({info.explanation_url})" if info.explanation_url else ""
    earlier = moved and start < (cert.renewal_time or end)
    return Polled(
        (
            "RenewalInfoMoved" if moved else "RenewalInfo",
            f"The CA suggests renewing between {start.isoformat()} and {end.isoformat()}; "
            f"renewal chosen at {cert.ari_renewal_time.isoformat()}{note}",
            Event.WARNING if earlier else Event.NORMAL,
        )
    )


def replaces_for(request: CertificateRequest) -> str:
    """The ARI id of the certificate a renewal request replaces ("" for a first issuance,
    a certificate from another issuer, or one without an authority key identifier)."""
    cert = request.certificate
    if cert is None or cert.revision is None:
        return ""
    secret = Secret.objects.filter(name=cert.secret_name, certificate=cert).first()
    if secret is None or not secret.tls_crt:
        return ""
    previous = CertificateRequest.objects.filter(certificate=cert, revision=cert.revision).first()
    if previous is not None and previous.issuer_id != request.issuer_id:
        return ""  # another CA's certificate: this one cannot replace it
    try:
        return ari_cert_id(secret.tls_crt)
    except ValueError:
        return ""
