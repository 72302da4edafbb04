"""Django's admin site, when ENABLE_DJANGO_ADMIN is on: django-otp's OTPAdminSite behind the
console's own sign-in.

Its login page is the console's (/login/, then the code page and any step the sign-in owes:
console/signin_steps.py), so it shares the lock after failed sign-ins and the audit log with
every other form, and OTPAdminSite lets in only a session verified with a second factor. Only
active admins (the console's admin role) get past it. Off by default: /admin/ is not routed.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django_otp.admin import OTPAdminSite

from console import signin_steps
from issuance.access import two_factor
from issuance.access.roles import ADMIN, roles_of


class ConsoleAdminSite(OTPAdminSite):  # type: ignore[misc]
    site_header = "Issuance Console (Django admin)"
    site_title = "Issuance Console admin"

    def has_permission(self, request: HttpRequest) -> bool:
        user: Any = request.user
        return (
            bool(user.is_active)
            and ADMIN in roles_of(user)
            and bool(user.is_verified())
            and not signin_steps.pending(request.session)
        )

    def login(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """The console's sign-in, whose steps end with the second factor verified. A user
        signed in already (the console's login page would send them straight back here) goes
        to the step that is missing: setting up a factor, or its code."""
        target = request.GET.get("next") or reverse("admin:index", current_app=self.name)
        user: Any = request.user
        if not user.is_authenticated:
            return redirect_to_login(target)
        if not user.is_active or ADMIN not in roles_of(user):
            raise PermissionDenied("the Django admin is for admins")
        if signin_steps.pending(request.session):
            step = signin_steps.pending(request.session)[0]
        elif two_factor.has_factor(user):
            # Signed in without the code (a session from before the factor was set up).
            request.session[signin_steps.STEPS] = [signin_steps.VERIFY]
            step = signin_steps.VERIFY
        else:
            step = signin_steps.ENROL
        return signin_steps.redirect_to_step(request, step, target)
