"""ASGI entry point: Django for HTTP, Channels for the live WebSocket (/ws/live/)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# Django must be set up before anything imports models (the consumers do); this is what
# get_asgi_application() does before making its handler.
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from console.asgi_http import ThreadedASGIHandler  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402
from console.unavailable import WebSocketsWhileUnavailable  # noqa: E402
from issuance.acme.solvers.http01.asgi import AcmeChallengeApp  # noqa: E402

# Plain HTTP requests run whole on a fixed pool of threads (see console.asgi_http).
django_application = ThreadedASGIHandler(settings.WEB_THREADS)

application = ProtocolTypeRouter(
    {
        # HTTP-01 token answers before Django's request machinery (see issuance.acme.solvers.http01.asgi).
        "http": AcmeChallengeApp(django_application),
        # Session-authenticated, and only from pages of this site (no cross-site hijacking);
        # refused at once while the database (the session's) is unavailable.
        "websocket": WebSocketsWhileUnavailable(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)
