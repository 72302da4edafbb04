"""Webhook delivery controller: POST one queued issuance notice, record the attempt.

A delivery is its own reconciled row, so a slow or dead receiver holds one worker thread
for at most the timeouts (connect 5 s, read 10 s) and never a certificate: issuance has
stored its revision (and queued the row) before any of this runs. Failures are retried on
the schedule in RETRY_AFTER, then the row is Failed; every attempt's outcome is kept on the
row (`attempts`). The POST is signed with `issuance/notifications/webhook_signing.py`; the secret is decrypted
here and goes nowhere else (not into the row, events or logs).

The read timeout bounds each wait for the receiver (requests applies it per read), and
the answer's body is not read, so a receiver cannot hold a worker thread by trickling one.

A worker killed after the POST and before storing the outcome sends the notice again on
the next pass: at least once. Receivers tell repeats apart by the `X-Issuance-Delivery`
header (and the revision in the body).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import requests
from django.utils import timezone

from issuance.controllers.base import Result
from issuance.models import Event, WebhookDelivery, WebhookDeliveryState
from issuance.notifications import webhook_signing
from issuance.observability import events
from issuance.pki.encryption import DecryptionError

log = logging.getLogger("issuance.notifications.webhooks")

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
# The wait after the 1st, 2nd, ... failed attempt; after the last one the row is Failed.
RETRY_AFTER = (
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(hours=1),
    timedelta(hours=6),
)
MAX_ATTEMPTS = len(RETRY_AFTER) + 1
DELIVERY_HEADER = "X-Issuance-Delivery"
ERROR_MAX = 300


def post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(HTTP status or None, error text); a 2xx status is success. Never raises."""
    hook = delivery.webhook
    body = webhook_signing.body_of(delivery.payload)
    try:
        secret = hook.secret
    except DecryptionError:
        return None, "the signing secret cannot be decrypted with KEY_ENCRYPTION_KEY"
    headers = webhook_signing.signed_headers(secret, body)
    headers[DELIVERY_HEADER] = str(delivery.pk)
    headers["User-Agent"] = "issuance-console-webhook"
    try:
        response = requests.post(
            hook.url,
            data=body,
            headers=headers,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            allow_redirects=False,  # a redirect would resend the notice somewhere unchecked
            stream=True,  # only the status matters: the answer's body is never read
        )
        response.close()
    except requests.Timeout as exc:
        return None, f"timed out ({type(exc).__name__})"
    except requests.RequestException as exc:
        return None, describe(exc)
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    return response.status_code, f"HTTP {response.status_code}"


def describe(exc: BaseException) -> str:
    """The root cause ("ConnectionRefusedError: [Errno 111] Connection refused"), which,
    unlike requests' own message, does not repeat the URL (its path or query may hold a
    token of the receiver's, and failures reach the timeline)."""
    root = exc
    while (inner := root.__cause__ or root.__context__) is not None:
        root = inner
    return f"{type(root).__name__}: {str(root)[:ERROR_MAX]}"


def reconcile(delivery: WebhookDelivery) -> Result:
    if delivery.state != WebhookDeliveryState.PENDING:
        return Result.done()
    hook = delivery.webhook
    if not hook.enabled and delivery.event != "test":
        _finish(delivery, WebhookDeliveryState.FAILED, "the webhook is disabled")
        return Result.done()
    started = time.monotonic()
    status, error = post(delivery)
    attempt = {
        "at": timezone.now().isoformat(),
        "status": status,
        "error": error,
        "ms": int((time.monotonic() - started) * 1000),
    }
    delivery.attempts = [*delivery.typed_attempts, attempt]
    count = len(delivery.attempts)
    if not error:
        log.info("webhook %s: delivery %s delivered (%s)", hook.name, delivery.pk, status)
        _finish(delivery, WebhookDeliveryState.DELIVERED, "")
        return Result.done()
    if count >= MAX_ATTEMPTS:
        log.warning("webhook %s: delivery %s failed for good: %s", hook.name, delivery.pk, error)
        _finish(delivery, WebhookDeliveryState.FAILED, error)
        return Result.done()
    delay = RETRY_AFTER[count - 1]
    log.info(
        "webhook %s: delivery %s attempt %d failed (%s); retry in %s",
        hook.name,
        delivery.pk,
        count,
        error,
        delay,
    )
    delivery.save(update_fields=["attempts"])
    return Result.after(delay)


def _finish(delivery: WebhookDelivery, state: str, error: str) -> None:
    delivery.state = state
    if state == WebhookDeliveryState.DELIVERED:
        delivery.delivered_at = timezone.now()
    delivery.save(update_fields=["attempts", "state", "delivered_at"])
    if state == WebhookDeliveryState.FAILED:
        what = (
            f"revision {delivery.revision} of {delivery.certificate_name}"
            if delivery.revision
            else "a test notice"
        )
        events.record(
            "IssuanceWebhook",
            delivery.webhook.name,
            "DeliveryFailed",
            f"Gave up delivering {what} after {len(delivery.typed_attempts)} attempts: {error}",
            type_=Event.WARNING,
            certificate_name=delivery.certificate_name,
        )
