from __future__ import annotations

from django.apps import AppConfig


class IssuanceConfig(AppConfig):
    name = "issuance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Live updates follow every committed save, so controllers need no publish calls.
        from issuance.kubernetes.certmanager import cluster_actions
        from issuance.observability import publish

        publish.connect_signals()
        cluster_actions.connect_signals()
