"""ASGI entry point: Django for HTTP, Channels for the live WebSocket (/ws/live/)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# Django must be set up before anything imports models (the consumers do).
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from issuance.solvers.http01_asgi import AcmeChallengeApp  # noqa: E402

application = ProtocolTypeRouter(
    {
        # HTTP-01 token answers before Django's request machinery (see http01_asgi).
        "http": AcmeChallengeApp(django_application),
        # Session-authenticated, and only from pages of this site (no cross-site hijacking).
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
