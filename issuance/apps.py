from __future__ import annotations

from django.apps import AppConfig


class IssuanceConfig(AppConfig):
    name = "issuance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Live updates follow every committed save, so controllers need no publish calls.
        from issuance import publish
        from issuance.clusters import actions as cluster_actions

        publish.connect_signals()
        cluster_actions.connect_signals()
