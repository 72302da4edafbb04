"""Permissions-Policy on every answer: the console uses no powerful browser feature.

Django's SecurityMiddleware sends X-Content-Type-Options, Referrer-Policy and
Cross-Origin-Opener-Policy, its XFrameOptionsMiddleware X-Frame-Options, and django-csp the
Content-Security-Policy; this adds the one header none of them covers. A small middleware
rather than a package: the header is one fixed string.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

# Features a page (or anything it embeds) could ask the browser for: none is needed, so each
# is denied to every origin, this one included. Only names Chromium knows, so it logs no
# "Unrecognized feature" warning on every page.
DENIED_FEATURES = (
    "accelerometer",
    "autoplay",
    "camera",
    "display-capture",
    "encrypted-media",
    "fullscreen",
    "geolocation",
    "gyroscope",
    "magnetometer",
    "microphone",
    "midi",
    "payment",
    "picture-in-picture",
    "publickey-credentials-get",
    "screen-wake-lock",
    "serial",
    "usb",
    "xr-spatial-tracking",
)
PERMISSIONS_POLICY = ", ".join(f"{feature}=()" for feature in DENIED_FEATURES)


class PermissionsPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
