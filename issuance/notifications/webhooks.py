"""Issuance webhooks: configure them, queue a notice per new revision, build its body.

A notice is queued (one WebhookDelivery row per matching enabled webhook) inside the
transaction that stores the revision (`controllers/issuing.py`), so it exists exactly when
the revision does; the worker POSTs it later (`controllers/webhookdeliveries.py`). The body
says which certificate changed and how to recognise the new one (revision, serial, dates,
DNS names, issuer), never a key: a receiver fetches the pair with its own credentials.
The signing secret is encrypted at rest and never written to events or logs.
"""

from __future__ import annotations

import secrets as pysecrets
from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance.models import (
    Certificate,
    DeliveryEvent,
    IssuanceWebhook,
    WebhookDelivery,
    validate_resource_name,
)
from issuance.models.issuancewebhook import URL_MAX, validate_webhook_url
from issuance.observability import events
from issuance.pki.x509 import CertInfo

SECRET_MIN = 16
SECRET_MAX = 256
GLOB_MAX = 253


class WebhookError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class WebhookExists(WebhookError):
    pass


def new_secret() -> str:
    """43 URL-safe characters: 256 random bits."""
    return pysecrets.token_urlsafe(32)


def _check(name: str, url: str, secret: str, issuer_glob: str, certificate_glob: str) -> None:
    try:
        validate_resource_name(name)
    except ValidationError as exc:
        raise WebhookError("name", " ".join(exc.messages)) from None
    if len(url) > URL_MAX:
        raise WebhookError("url", f"at most {URL_MAX} characters")
    try:
        validate_webhook_url(url)
    except ValidationError:
        raise WebhookError("url", "must be an http:// or https:// URL") from None
    if not SECRET_MIN <= len(secret) <= SECRET_MAX:
        raise WebhookError("secret", f"must be {SECRET_MIN} to {SECRET_MAX} characters")
    for field, glob in (("issuer", issuer_glob), ("certificate", certificate_glob)):
        if len(glob) > GLOB_MAX:
            raise WebhookError(field, f"at most {GLOB_MAX} characters")


def create_webhook(
    name: str,
    url: str,
    secret: str,
    *,
    actor: str,
    enabled: bool = True,
    issuer_glob: str = "",
    certificate_glob: str = "",
) -> IssuanceWebhook:
    _check(name, url, secret, issuer_glob, certificate_glob)
    hook = IssuanceWebhook(
        name=name,
        url=url,
        enabled=enabled,
        issuer_glob=issuer_glob,
        certificate_glob=certificate_glob,
        created_by=actor,
    )
    hook.set_secret(secret)
    with transaction.atomic():
        if IssuanceWebhook.objects.filter(name=name).exists():
            raise WebhookExists("name", f"a webhook named {name!r} already exists")
        try:
            with transaction.atomic():
                hook.save()
        except IntegrityError:
            raise WebhookExists("name", f"a webhook named {name!r} already exists") from None
        events.record("IssuanceWebhook", name, "Created", "Issuance webhook created", actor=actor)
    return hook


def delete_webhook(hook: IssuanceWebhook, *, actor: str) -> None:
    """Deletes it and its deliveries (pending ones are not sent)."""
    with transaction.atomic():
        name = hook.name
        hook.delete()
        events.record("IssuanceWebhook", name, "Deleted", "Issuance webhook deleted", actor=actor)


def issued_payload(cert: Certificate, revision: int | None, info: CertInfo) -> dict[str, object]:
    return {
        "event": DeliveryEvent.ISSUED.value,
        "certificate": cert.name,
        "revision": revision,
        "serial": info.serial_number,
        "notBefore": info.not_before.isoformat(),
        "notAfter": info.not_after.isoformat(),
        "dnsNames": list(info.dns_names),
        "issuer": cert.issuer.name,
    }


def queue_issued(
    cert: Certificate, revision: int | None, info: CertInfo, on_commit: Callable[[], None]
) -> int:
    """In the caller's transaction (the one storing the revision): a delivery per matching
    enabled webhook. Returns how many were queued; `on_commit` runs after commit if any."""
    hooks = [
        h
        for h in IssuanceWebhook.objects.filter(enabled=True).only(
            "id", "issuer_glob", "certificate_glob"
        )
        if h.matches(cert.name, cert.issuer.name)
    ]
    if not hooks:
        return 0
    payload = issued_payload(cert, revision, info)
    now = timezone.now()
    WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                webhook=h,
                event=DeliveryEvent.ISSUED,
                certificate_name=cert.name,
                revision=revision,
                payload={**payload},
                created_at=now,
                due_at=now,
            )
            for h in hooks
        ],
        ignore_conflicts=True,  # already queued (a repeated pass): not twice
    )
    transaction.on_commit(on_commit)
    return len(hooks)


def queue_test(hook: IssuanceWebhook, *, actor: str) -> WebhookDelivery:
    """A test notice (event "test", made-up certificate facts), sent by the worker."""
    now = timezone.now()
    payload: dict[str, object] = {
        "event": DeliveryEvent.TEST.value,
        "certificate": "example",
        "revision": 0,
        "serial": "0",
        "notBefore": now.isoformat(),
        "notAfter": now.isoformat(),
        "dnsNames": ["example.invalid"],
        "issuer": "example",
    }
    with transaction.atomic():
        delivery = WebhookDelivery.objects.create(
            webhook=hook, event=DeliveryEvent.TEST, payload=payload, created_at=now, due_at=now
        )
        events.record("IssuanceWebhook", hook.name, "TestQueued", "Test notice queued", actor=actor)
        transaction.on_commit(_notify)
    return delivery


def _notify() -> None:
    from issuance.worker.wakeup import notify_workers

    notify_workers()
