"""Sending one message: through apprise, or as our signed JSON webhook. Each send runs on a
daemon thread joined with a timeout, so a receiver that hangs costs the worker at most
SEND_TIMEOUT seconds (the thread ends when its own socket timeouts fire)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from dataclasses import dataclass

import apprise

from issuance.notifications import webhook_signing
from issuance.notifications.channel_urls import is_webhook, webhook_target

SEND_TIMEOUT = 20.0
# Socket timeouts inside a send (apprise's cto/rto, smtplib's timeout, urllib's timeout).
SOCKET_TIMEOUT = 10


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    condition: str
    subject: str
    id: int  # the Notification's id: the same on a repeat (sends are at least once)


class SendError(Exception):
    pass


def _with_timeouts(url: str) -> str:
    if "cto=" in url or "rto=" in url:
        return url
    return url + ("&" if "?" in url else "?") + f"cto={SOCKET_TIMEOUT}&rto={SOCKET_TIMEOUT}"


def _apprise(url: str, message: Message) -> None:
    sender = apprise.Apprise()
    if not sender.add(_with_timeouts(url)):
        raise SendError("apprise no longer accepts the channel URL")
    # apprise logs failures itself but only returns False: collect its log for the reason.
    with apprise.LogCapture(  # type: ignore[no-untyped-call]
        level=apprise.logging.WARNING, fmt="%(message)s"
    ) as logs:
        ok = sender.notify(title=message.title, body=message.body)
    if not ok:
        lines = [line for line in logs.getvalue().splitlines() if line.strip()]
        raise SendError(lines[-1][:500] if lines else "apprise reported a failure")


def _webhook(url: str, secret: str, message: Message) -> None:
    payload: dict[str, object] = {
        "id": message.id,
        "title": message.title,
        "body": message.body,
        "condition": message.condition,
        "subject": message.subject,
    }
    body = webhook_signing.body_of(payload)
    target = webhook_target(url)
    if not target.startswith(("https://", "http://")):  # validated at save; checked again
        raise SendError("a signed webhook URL must be http(s)")
    request = urllib.request.Request(  # noqa: S310 (the scheme is checked above)
        target,
        data=body,
        headers=webhook_signing.signed_headers(secret.encode(), body),
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=SOCKET_TIMEOUT) as response:  # noqa: S310
            response.read(1024)
    except urllib.error.HTTPError as exc:
        raise SendError(f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SendError(f"cannot reach the receiver: {exc}") from None


def send(url: str, secret: str, message: Message, timeout: float = SEND_TIMEOUT) -> None:
    """Send, or raise SendError (with a reason that never holds the URL)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            if is_webhook(url):
                _webhook(url, secret, message)
            else:
                _apprise(url, message)
        except BaseException as exc:  # reported to the caller below
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="notification-send", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise SendError(f"no answer within {timeout:.0f} s")
    error = outcome[0]
    if isinstance(error, SendError):
        raise error
    if error is not None:
        raise SendError(f"{type(error).__name__}: {error}"[:500])
