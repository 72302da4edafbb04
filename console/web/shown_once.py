"""Post/redirect/get for forms that create something with a secret shown once (an API
token, a user's one-time password, a webhook's generated secret, a download token).

The POST creates, keeps what to show in the session and redirects; the GET that follows
takes it out of the session and shows it. Reloading the result page creates nothing again
and no longer shows the secret; the browser's history holds no POST to resend. The secret
is kept encrypted with KEY_ENCRYPTION_KEY (issuance.pki.encryption), as the other secrets
at rest: the session row is in the database until the GET that reads it.
"""

from __future__ import annotations

import json
from typing import TypedDict, cast

from django.http import HttpRequest

from issuance.pki.encryption import DecryptionError, decrypt_text, encrypt_text

_PREFIX = "_shown_once:"


class ShownOnce(TypedDict):
    """What the result page shows: the row created (its primary key) and its secret."""

    id: int
    secret: str


def keep(request: HttpRequest, what: str, created_id: int, secret: str) -> None:
    """After a create: what the next GET of the result page shows, once."""
    shown: ShownOnce = {"id": created_id, "secret": secret}
    request.session[_PREFIX + what] = encrypt_text(json.dumps(shown))


def take(request: HttpRequest, what: str) -> ShownOnce | None:
    """On the result page: what a create kept, removed from the session (None if nothing)."""
    kept = request.session.pop(_PREFIX + what, None)
    if not isinstance(kept, str):
        return None
    try:
        return cast(ShownOnce, json.loads(decrypt_text(kept)))
    except (DecryptionError, ValueError):
        return None  # kept under a rotated key: show nothing rather than fail the page
