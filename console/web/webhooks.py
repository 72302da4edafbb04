"""Issuance webhooks (admin): list, create (the secret shown once when generated), delete,
send a test; the recent deliveries with every attempt.

Acts through issuance/notifications/webhooks.py, as the API does. The signing secret is in the one
response that created the webhook (when the console generated it) and nowhere else.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web import shown_once
from console.web.access import permission_required, render_page
from issuance.models import IssuanceWebhook, WebhookDelivery
from issuance.models.issuancewebhook import URL_MAX
from issuance.notifications import webhooks

RECENT_DELIVERIES = 50


class NewWebhookForm(forms.Form):
    name = forms.CharField(max_length=253, help_text="lowercase letters, digits, '-' and '.'")
    url = forms.CharField(max_length=URL_MAX, label="URL", help_text="http:// or https://")
    secret = forms.CharField(
        required=False,
        strip=False,
        max_length=webhooks.SECRET_MAX,
        widget=forms.PasswordInput,
        label="Signing secret",
        help_text=f"at least {webhooks.SECRET_MIN} characters; leave empty to generate one",
    )
    issuer_glob = forms.CharField(
        required=False,
        max_length=webhooks.GLOB_MAX,
        label="Issuer filter",
        help_text="e.g. internal-*",
    )
    certificate_glob = forms.CharField(
        required=False,
        max_length=webhooks.GLOB_MAX,
        label="Certificate filter",
        help_text="e.g. web-*",
    )


def _context(form: NewWebhookForm | None = None) -> dict[str, Any]:
    deliveries = WebhookDelivery.objects.select_related("webhook").order_by("-created_at", "-id")
    return {
        "hooks": list(IssuanceWebhook.objects.order_by("name")),
        "deliveries": list(deliveries[:RECENT_DELIVERIES]),
        "form": form or NewWebhookForm(),
    }


@never_cache
@permission_required("issuance-webhook", "read")
def webhook_list(request: HttpRequest) -> HttpResponse:
    context = _context()
    created = shown_once.take(request, "webhook")
    if created is not None:
        context["created"] = IssuanceWebhook.objects.filter(pk=created["id"]).first()
        context["secret_text"] = created["secret"]  # "" when the admin gave the secret
    return render_page(request, "console/webhooks.html", context)


@require_POST
@never_cache
@permission_required("issuance-webhook", "create")
def webhook_create(request: HttpRequest) -> HttpResponse:
    form = NewWebhookForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        generated = "" if data["secret"] else webhooks.new_secret()
        try:
            hook = webhooks.create_webhook(
                data["name"],
                data["url"],
                data["secret"] or generated,
                actor=request.user.get_username(),
                issuer_glob=data["issuer_glob"],
                certificate_glob=data["certificate_glob"],
            )
        except webhooks.WebhookError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            # Post/redirect/get: the list shows a generated secret once
            # (console/web/shown_once.py).
            shown_once.keep(request, "webhook", hook.pk, generated)
            return redirect("web:webhooks")
    return render_page(request, "console/webhooks.html", _context(form), status=400)


@require_POST
@permission_required("issuance-webhook", "delete")
def webhook_delete(request: HttpRequest, name: str) -> HttpResponse:
    hook = get_object_or_404(IssuanceWebhook, name=name)
    webhooks.delete_webhook(hook, actor=request.user.get_username())
    messages.success(request, f"Webhook {name} deleted.")
    return redirect("web:webhooks")


@require_POST
@permission_required("issuance-webhook", "send-test")
def webhook_test(request: HttpRequest, name: str) -> HttpResponse:
    hook = get_object_or_404(IssuanceWebhook, name=name)
    webhooks.queue_test(hook, actor=request.user.get_username())
    messages.success(
        request, f"Test notice queued for {name}; the worker sends it (see Deliveries below)."
    )
    return redirect("web:webhooks")
