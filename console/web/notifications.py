"""Notifications page: channels (masked), rules and every delivery with its result. Every role
reads it; admins add and remove channels and rules and send a test message."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web.access import permission_required, render_page
from issuance.models import (
    Notification,
    NotificationChannel,
    NotificationRule,
    validate_resource_name,
)
from issuance.notifications import channel_store, rules

PAGE_SIZE = 50


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=253, validators=[validate_resource_name])
    url = forms.CharField(
        label="URL",
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text="An apprise URL (mailto://, slack://, msteams://, discord://, tgram://, "
        "json://, …) or webhook+https://… for a signed JSON webhook. Not shown again.",
    )
    secret = forms.CharField(
        required=False,
        max_length=channel_store.MAX_SECRET,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text="Signed webhooks only: the HMAC key (16 characters or more).",
    )
    rate_limit_per_hour = forms.IntegerField(
        label="Messages per hour",
        min_value=1,
        max_value=channel_store.MAX_RATE_LIMIT,
        initial=channel_store.DEFAULT_RATE_LIMIT,
    )
    digest_hour = forms.IntegerField(
        label="Daily digest hour (UTC)",
        required=False,
        min_value=0,
        max_value=23,
        help_text="Empty: send each message. An hour: one summary a day instead.",
    )


class ChannelEditForm(ChannelForm):
    """The same fields; URL and secret blank means "keep" (they are never shown again)."""

    name = None  # type: ignore[assignment]  # a channel keeps its name

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["url"].required = False
        self.fields["url"].help_text = "Leave empty to keep the stored URL (not shown)."
        self.fields["secret"].help_text = "Leave empty to keep the stored secret."


class RuleForm(forms.Form):
    """The page's fields; the checks are issuance.notifications.rules' (the API's too)."""

    name = forms.CharField(max_length=253)
    channel = forms.ModelChoiceField(
        queryset=NotificationChannel.objects.order_by("name"), to_field_name="name"
    )
    condition = forms.ChoiceField(choices=rules.CONDITION_CHOICES)
    threshold = forms.IntegerField(
        min_value=0,
        max_value=rules.MAX_THRESHOLD,
        required=False,  # empty (stored as 0): the condition's default, as the help says
        widget=forms.NumberInput(attrs={"placeholder": "default"}),
        help_text="Days for “expiring” and “served certificate expiring”, minutes for “waiting "
        "for approval”, “cluster unreachable” and “endpoint unreachable”; leave empty for the "
        "default (14 days, 30 minutes, 1 minute, 10 minutes). Unused otherwise.",
    )
    name_pattern = forms.CharField(
        required=False,
        max_length=rules.PATTERN_MAX,
        help_text="Only names matching, e.g. web-* (optional).",
    )
    issuer_pattern = forms.CharField(
        required=False, max_length=rules.PATTERN_MAX, help_text="Only issuers matching (optional)."
    )
    notify_resolved = forms.BooleanField(
        label="Also when resolved",
        required=False,
        help_text="“Cluster unreachable”: one more message when the cluster is reachable "
        "again; the endpoint conditions: when the endpoint is well again or removed. Unused "
        "otherwise.",
    )


def _context(
    request: HttpRequest, channel_form: ChannelForm | None = None, rule_form: RuleForm | None = None
) -> dict[str, Any]:
    deliveries = Notification.objects.select_related("channel").defer(
        "channel__url_ciphertext", "channel__secret_ciphertext"
    )
    state = request.GET.get("state", "")
    if state:
        deliveries = deliveries.filter(state=state)
    page = Paginator(deliveries, PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "channels": list(NotificationChannel.objects.defer("url_ciphertext", "secret_ciphertext")),
        "rules": list(
            NotificationRule.objects.select_related("channel").only(
                "name",
                "condition",
                "threshold",
                "name_pattern",
                "issuer_pattern",
                "notify_resolved",
                "enabled",
                "channel__name",
            )
        ),
        "page": page,
        "deliveries": list(page.object_list),
        "state": state,
        "states": ["pending", "sent", "retrying", "failed", "digest", "digested"],
        "channel_form": channel_form or ChannelForm(),
        "rule_form": rule_form or RuleForm(),
    }


@never_cache
@permission_required("notification-channel", "read")
def notification_page(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/notifications.html", _context(request))


def _save_channel(
    request: HttpRequest,
    form: ChannelForm,
    channel: NotificationChannel | None,
    name: str,
) -> bool:
    """Save a valid form through channels.save; its errors go next to their fields."""
    data = form.cleaned_data
    try:
        channel_store.save(
            channel,
            name,
            channel_store.ChannelInput(
                url=data["url"] or None,
                secret=data["secret"] or None,
                rate_limit_per_hour=data["rate_limit_per_hour"],
                digest_hour=data["digest_hour"],
                digest_hour_set=True,
            ),
            request.user.get_username(),
        )
    except channel_store.ChannelError as exc:
        for field, error in exc.errors.items():
            form.add_error(field if field in form.fields else None, error)
        return False
    return True


@require_POST
@permission_required("notification-channel", "create")
def channel_create(request: HttpRequest) -> HttpResponse:
    form = ChannelForm(request.POST)
    if form.is_valid() and _save_channel(request, form, None, form.cleaned_data["name"]):
        messages.success(request, f"Channel {form.cleaned_data['name']} added.")
        return redirect("web:notifications")
    return render_page(
        request, "console/notifications.html", _context(request, channel_form=form), status=400
    )


@never_cache
@permission_required("notification-channel", "change")
def channel_edit(request: HttpRequest, name: str) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, name=name)
    status = 200
    if request.method == "POST":
        form = ChannelEditForm(request.POST)
        if form.is_valid() and _save_channel(request, form, channel, name):
            messages.success(request, f"Channel {name} changed.")
            return redirect("web:notifications")
        status = 400
    else:
        form = ChannelEditForm(
            initial={
                "rate_limit_per_hour": channel.rate_limit_per_hour,
                "digest_hour": channel.digest_hour,
            }
        )
    return render_page(
        request,
        "console/notification_channel_edit.html",
        {"channel": channel, "form": form},
        status=status,
    )


@require_POST
@permission_required("notification-channel", "send-test")
def channel_test(request: HttpRequest, name: str) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, name=name)
    channel_store.send_test(channel, request.user.get_username())
    messages.success(request, f"Test message queued for {name}: its result appears below.")
    return redirect("web:notifications")


@require_POST
@permission_required("notification-channel", "change")
def channel_toggle(request: HttpRequest, name: str) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, name=name)
    channel_store.save(
        channel,
        name,
        channel_store.ChannelInput(enabled=not channel.enabled),
        request.user.get_username(),
    )
    return redirect("web:notifications")


@require_POST
@permission_required("notification-channel", "delete")
def channel_delete(request: HttpRequest, name: str) -> HttpResponse:
    channel_store.delete(
        get_object_or_404(NotificationChannel, name=name), request.user.get_username()
    )
    messages.success(request, f"Channel {name} deleted (with its rules and deliveries).")
    return redirect("web:notifications")


@require_POST
@permission_required("notification-rule", "create")
def rule_create(request: HttpRequest) -> HttpResponse:
    form = RuleForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            rule = rules.create(
                data["name"],
                {
                    "channel": data["channel"].name,
                    "condition": data["condition"],
                    "threshold": data["threshold"] or 0,
                    "name_pattern": data["name_pattern"],
                    "issuer_pattern": data["issuer_pattern"],
                    "notify_resolved": data["notify_resolved"],
                },
                request.user.get_username(),
            )
        except rules.RuleError as exc:
            for field, error in exc.errors.items():
                form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, f"Rule {rule.name} added.")
            return redirect("web:notifications")
    return render_page(
        request, "console/notifications.html", _context(request, rule_form=form), status=400
    )


@require_POST
@permission_required("notification-rule", "delete")
def rule_delete(request: HttpRequest, pk: int) -> HttpResponse:
    rules.delete(get_object_or_404(NotificationRule, pk=pk), request.user.get_username())
    return redirect("web:notifications")
