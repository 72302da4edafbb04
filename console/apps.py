from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Live updates published by the domain go out through the channel layer.
        from console import signin_protection, signin_steps
        from console.live import sender
        from issuance.observability import publish

        publish.subscribe(sender)
        # Sign-ins, failures, locks and sign-outs into the audit log.
        signin_protection.connect()
        # The steps a password sign-in still owes (second factor, password change).
        signin_steps.connect()
