"""{% sso_login as sso %}: what the login page offers (console/web/oidc.py, LOCAL_LOGIN)."""

from __future__ import annotations

from typing import TypedDict

from django import template
from django.conf import settings

register = template.Library()


class SsoLogin(TypedDict):
    enabled: bool
    name: str
    local_login: bool


@register.simple_tag
def sso_login() -> SsoLogin:
    return {
        "enabled": bool(settings.OIDC_ENABLED),
        "name": str(settings.OIDC_PROVIDER_NAME),
        "local_login": bool(settings.LOCAL_LOGIN),
    }
