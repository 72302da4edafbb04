"""Channel URLs: validated with apprise at save, shown only as a scheme and a masked host."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import apprise

# apprise logs the URLs it parses at DEBUG (user names, hosts, tokens in paths): keep its
# logger above that, whatever the root level.
logging.getLogger("apprise").setLevel(logging.WARNING)

# Our own kind: a JSON POST signed with issuance.signing (the secret is kept with the channel).
WEBHOOK_PREFIX = "webhook+"


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
    if is_webhook(url):
        parts = urlsplit(webhook_target(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "A signed webhook URL is webhook+https://host/path (or webhook+http://)."
        return None
    if "://" not in url:
        return "Not an apprise URL: expected scheme://… (mailto://, slack://, json://, …)."
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
