from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Live updates published by the domain go out through the channel layer.
        from console.live import sender
        from issuance import publish

        publish.subscribe(sender)
