"""ASGI entry point: HTTP now; WebSocket routing (/ws/live/) is added by the live console."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_asgi_application()
