from __future__ import annotations

from django.apps import AppConfig


class IssuanceConfig(AppConfig):
    name = "issuance"
    default_auto_field = "django.db.models.BigAutoField"
