"""Channel URLs: validated with apprise at save, shown only as a scheme and a masked host."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

import apprise
from apprise.manager_plugins import NotificationManager

# apprise logs the URLs it parses at DEBUG (user names, hosts, tokens in paths): keep its
# logger above that, whatever the root level.
logging.getLogger("apprise").setLevel(logging.WARNING)

# Our own kind: a JSON POST signed with issuance.notifications.webhook_signing (the secret is kept with the channel).
WEBHOOK_PREFIX = "webhook+"


# The schemes apprise can send to here (plugins whose dependencies are missing, such as the
# desktop ones, are left out), plus http(s) for the services apprise knows by their own web
# address (a Discord or Slack webhook URL) and our signed webhook. Read from apprise, so a
# newer apprise's services are accepted without a change here.
SCHEMES: tuple[str, ...] = tuple(
    sorted(
        {*NotificationManager().schemas(include_disabled=False), "http", "https"}  # type: ignore[no-untyped-call]
        | {f"{WEBHOOK_PREFIX}http", f"{WEBHOOK_PREFIX}https"}
    )
)
# scheme://rest, the rest without spaces or control characters (a URL escapes them). The
# OpenAPI schema shows this pattern (\A and \Z become ^ and $ there); an explicit ASCII class,
# not \s, which Python and ECMAScript define differently.
URL_RE = re.compile(r"\A(?:" + "|".join(re.escape(s) for s in SCHEMES) + r")://[^\x00-\x20\x7f]+\Z")
URL_MAX = 4096
URL_HELP = (
    "An apprise URL, scheme://… with one of apprise's schemes (mailto://, mailtos://, "
    "slack://, discord://, tgram://, json://, …, or a service's own https:// webhook address "
    "that apprise recognises), or webhook+https://host/path for a JSON webhook signed by the "
    "console (needs `secret`). No whitespace. The pattern says which schemes; whether the rest "
    "has the form the service needs (tokens, channels, recipients) is checked with apprise "
    "when the channel is saved: 400 on `url` if apprise refuses it. Write-only: answers show "
    "only `target`."
)


def is_webhook(url: str) -> bool:
    return url.startswith(WEBHOOK_PREFIX)


def webhook_target(url: str) -> str:
    return url[len(WEBHOOK_PREFIX) :]


def validation_error(url: str) -> str | None:
    """Why the URL is not usable as a channel, or None. Never echoes the URL (it may hold a
    password or a token)."""
    url = url.strip()
    if not url:
        return "This field is required."
    if not URL_RE.fullmatch(url):
        scheme = url.split("://", 1)[0][:20] if "://" in url else ""
        if scheme and scheme not in SCHEMES:
            return (
                f"apprise does not accept this URL: it has no scheme {scheme!r} (schemes are "
                "lowercase)."
            )
        return (
            "Not an apprise URL: expected scheme://… (mailto://, slack://, json://, …) "
            "with no whitespace."
        )
    if is_webhook(url):
        parts = urlsplit(webhook_target(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "A signed webhook URL is webhook+https://host/path (or webhook+http://)."
        return None
    if not apprise.Apprise().add(url):
        scheme = url.split("://", 1)[0]
        return f"apprise does not accept this URL (scheme {scheme!r}): check its form."
    return None


def mask(url: str) -> str:
    """'mailto://sm***' style: the scheme and the first two characters of the host."""
    scheme, _, rest = url.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    host = authority.rsplit("@", 1)[-1].split(":", 1)[0]
    return f"{scheme[:20]}://{host[:2]}***" if host else f"{scheme[:20]}://***"
