"""Creating, changing and deleting channels (the console and the API both come here), and
queueing a test message. Timeline entries name the channel, never its URL or secret."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction

from issuance.models import NotificationChannel
from issuance.notifications import deliver, step
from issuance.notifications.channel_urls import is_webhook, validation_error
from issuance.observability import events

# Control characters: none in a key anyone types or pastes (PostgreSQL text cannot even hold NUL).
SECRET_RE = re.compile(r"\A[^\x00-\x1f\x7f]*\Z")
MIN_SECRET = 16
MAX_SECRET = 256
DEFAULT_RATE_LIMIT = 20
MAX_RATE_LIMIT = 10000


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
    if data.secret is not None and not MIN_SECRET <= len(data.secret) <= MAX_SECRET:
        # Whatever the URL: a short key is refused before it could ever sign.
        errors["secret"] = f"From {MIN_SECRET} to {MAX_SECRET} characters."
    elif data.secret is not None and not SECRET_RE.fullmatch(data.secret):
        errors["secret"] = "No control characters (tabs, line breaks, …)."  # noqa: S105
    elif url and is_webhook(url) and len(secret) < MIN_SECRET:
        errors["secret"] = f"A signed webhook needs a secret of at least {MIN_SECRET} characters."
    if data.rate_limit_per_hour is not None and not 1 <= data.rate_limit_per_hour <= MAX_RATE_LIMIT:
        errors["rate_limit_per_hour"] = f"Between 1 and {MAX_RATE_LIMIT} messages an hour."
    if data.digest_hour_set and data.digest_hour is not None and not 0 <= data.digest_hour <= 23:
        errors["digest_hour"] = "An hour of the day, 0 to 23 (UTC), or empty for no digest."
    return errors


def problems(channel: NotificationChannel | None, data: ChannelInput) -> dict[str, str]:
    """The field errors save() would raise, without saving (apply -f checks a whole file
    first); channel None: a new one."""
    if channel is None and data.url is None:
        return {"url": "This field is required."}
    return _check(channel or NotificationChannel(), data)


def apply(name: str, data: ChannelInput, actor: str) -> str:
    """Create the channel or bring it to `data` (apply -f): "created", "configured" or
    "unchanged" (nothing saved, no timeline entry). Raises ChannelError."""
    channel = NotificationChannel.objects.filter(name=name).first()
    if channel is None:
        save(None, name, data, actor)
        return "created"
    wanted = {
        "url": data.url.strip() if data.url is not None else None,
        "secret": data.secret,
        "enabled": data.enabled,
        "rate_limit_per_hour": data.rate_limit_per_hour,
    }
    same = all(v is None or getattr(channel, k) == v for k, v in wanted.items())
    if same and (not data.digest_hour_set or channel.digest_hour == data.digest_hour):
        return "unchanged"
    save(channel, name, data, actor)
    return "configured"


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
