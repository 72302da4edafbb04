"""Sign-in locks (admin): the accounts and addresses locked after failed sign-ins, and a
button that lifts a lock (issuance/access/signin.py; the lift is in the audit log)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web.access import permission_required, render_page
from issuance.access import signin


class LiftForm(forms.Form):
    what = forms.ChoiceField(choices=[(signin.ACCOUNT, "account"), (signin.ADDRESS, "address")])
    value = forms.CharField(max_length=255)


@never_cache
@permission_required("signin-lock", "read")
def lock_list(request: HttpRequest) -> HttpResponse:
    from django.conf import settings

    context = {
        "locks": signin.current_locks(),
        "limit": settings.AXES_FAILURE_LIMIT,
        "lock_minutes": int(signin.lock_time().total_seconds() // 60),
    }
    return render_page(request, "console/signin_locks.html", context)


@require_POST
@permission_required("signin-lock", "lift")
def lock_lift(request: HttpRequest) -> HttpResponse:
    form = LiftForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing to lift: name an account or an address.")
        return redirect("web:signin-locks")
    what, value = form.cleaned_data["what"], form.cleaned_data["value"]
    signin.lift(what, value, actor=request.user.get_username())
    messages.success(request, f"Lock on {what} {value} lifted.")
    return redirect("web:signin-locks")
