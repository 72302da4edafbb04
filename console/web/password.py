"""Password pages: every local user changes their own (Django's PasswordChangeView with the
console's template and AUTH_PASSWORD_VALIDATORS), and an admin resets another user's to a
generated one-time password, shown once, which the user must change at the next sign-in.

A wrong current password on the change form is a failed sign-in for django-axes (it counts
toward the same lock as the login page), so a borrowed session cannot guess the password.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import PasswordChangeView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console import signin_steps
from console.web import shown_once
from console.web.access import permission_required, role_flags
from issuance.access import passwords


class ChangePasswordView(PasswordChangeView):
    template_name = "registration/password_change.html"
    # form_valid() answers itself (the next step, or the security page).
    success_url = reverse_lazy("web:account-security")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(role_flags(self.request))
        context["forced"] = signin_steps.PASSWORD in signin_steps.pending(self.request.session)
        context["signin_pending"] = bool(signin_steps.pending(self.request.session))
        context["next"] = signin_steps.safe_next(self.request)
        context["live_groups"] = "dashboard"
        return context

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        # Saves the password and keeps this session signed in (update_session_auth_hash);
        # the user's other sessions end.
        super().form_valid(form)
        passwords.changed(self.request.user)
        messages.success(self.request, "Your password was changed.")
        if signin_steps.PASSWORD in signin_steps.pending(self.request.session):
            return signin_steps.complete(self.request, signin_steps.PASSWORD)
        return redirect("web:account-security")

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        if "old_password" in form.errors:
            user_login_failed.send(
                sender=__name__,
                credentials={"username": self.request.user.get_username()},
                request=self.request,
            )
        response = super().form_invalid(form)
        response.status_code = 400
        return response


password_change = never_cache(
    permission_required("account", "change")(ChangePasswordView.as_view())
)


@require_POST
@never_cache
@permission_required("user", "reset-password")
def reset(request: HttpRequest, pk: int) -> HttpResponse:
    """A new one-time password for the user, shown once by the users page (post/redirect/get,
    as when it was created: console/web/shown_once.py)."""
    user = get_object_or_404(User, pk=pk)
    if user.pk == request.user.pk:
        messages.error(request, "Change your own password on your account's security page.")
        return redirect("web:users")
    user, password = passwords.reset(user.pk, actor=request.user.get_username())
    shown_once.keep(request, "password-reset", user.pk, password)
    return redirect("web:users")
