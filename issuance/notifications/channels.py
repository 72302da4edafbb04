"""Creating, changing and deleting channels (the console and the API both come here), and
queueing a test message. Timeline entries name the channel, never its URL or secret."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from issuance import events
from issuance.models import NotificationChannel
from issuance.notifications import deliver, step
from issuance.notifications.urls import is_webhook, validation_error

MIN_SECRET = 16
DEFAULT_RATE_LIMIT = 20


class ChannelError(Exception):
    """Field errors: {"url": "…"}."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass
class ChannelInput:
    """What the user sent; None means "keep as it is" (a partial update)."""

    url: str | None = None
    secret: str | None = None
    enabled: bool | None = None
    rate_limit_per_hour: int | None = None
    digest_hour: int | None = None
    digest_hour_set: bool = False  # digest_hour given (None there turns the digest off)


def _check(channel: NotificationChannel, data: ChannelInput) -> dict[str, str]:
    errors: dict[str, str] = {}
    if data.url is not None:
        problem = validation_error(data.url)
        if problem:
            errors["url"] = problem
    url = data.url.strip() if data.url is not None else channel.url
    secret = data.secret if data.secret is not None else channel.secret
    if url and is_webhook(url) and len(secret) < MIN_SECRET:
        errors["secret"] = f"A signed webhook needs a secret of at least {MIN_SECRET} characters."
    if data.rate_limit_per_hour is not None and not 1 <= data.rate_limit_per_hour <= 10000:
        errors["rate_limit_per_hour"] = "Between 1 and 10000 messages an hour."
    if data.digest_hour_set and data.digest_hour is not None and not 0 <= data.digest_hour <= 23:
        errors["digest_hour"] = "An hour of the day, 0 to 23 (UTC), or empty for no digest."
    return errors


def save(
    channel: NotificationChannel | None, name: str, data: ChannelInput, actor: str
) -> NotificationChannel:
    """Create (channel None) or change a channel; raises ChannelError with field errors."""
    creating = channel is None
    target = channel or NotificationChannel(name=name, rate_limit_per_hour=DEFAULT_RATE_LIMIT)
    if creating and data.url is None:
        raise ChannelError({"url": "This field is required."})
    errors = _check(target, data)
    if creating and NotificationChannel.objects.filter(name=name).exists():
        errors["name"] = f"A channel named {name!r} already exists."
    if errors:
        raise ChannelError(errors)
    if data.url is not None:
        target.url = data.url.strip()
    if data.secret is not None:
        target.secret = data.secret
    if data.enabled is not None:
        target.enabled = data.enabled
    if data.rate_limit_per_hour is not None:
        target.rate_limit_per_hour = data.rate_limit_per_hour
    if data.digest_hour_set:
        target.digest_hour = data.digest_hour
    with transaction.atomic():
        target.save()
        events.record(
            "NotificationChannel",
            target.name,
            "Created" if creating else "Updated",
            f"Channel {target.name} ({target.url_hint})" + (" created" if creating else " changed"),
            actor=actor,
        )
    return target


def delete(channel: NotificationChannel, actor: str) -> None:
    with transaction.atomic():
        name = channel.name
        channel.delete()
        events.record(
            "NotificationChannel", name, "Deleted", f"Channel {name} deleted", actor=actor
        )


def send_test(channel: NotificationChannel, actor: str) -> None:
    """Queue a test message; the worker sends it (a hanging channel never blocks a request)."""
    with transaction.atomic():
        deliver.queue_test(channel, actor)
        events.record(
            "NotificationChannel",
            channel.name,
            "TestQueued",
            f"Test message queued for channel {channel.name}",
            actor=actor,
        )
        transaction.on_commit(_wake)


def _wake() -> None:
    from issuance.worker.wakeup import notify_workers

    step.request()
    notify_workers()
