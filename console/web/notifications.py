"""Notifications page: channels (masked), rules and every delivery with its result. Every role
reads it; admins add and remove channels and rules and send a test message."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web.access import admin_required, render_page, viewer_required
from issuance import events
from issuance.models import (
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
    validate_resource_name,
)
from issuance.notifications import channels

PAGE_SIZE = 50
RULE_CONDITIONS = [c for c in NotificationCondition.choices if c[0] not in ("test", "digest")]


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
        max_length=256,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text="Signed webhooks only: the HMAC key (16 characters or more).",
    )
    rate_limit_per_hour = forms.IntegerField(
        label="Messages per hour", min_value=1, max_value=10000, initial=20
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
    name = forms.CharField(max_length=100)
    channel = forms.ModelChoiceField(
        queryset=NotificationChannel.objects.order_by("name"), to_field_name="name"
    )
    condition = forms.ChoiceField(choices=RULE_CONDITIONS)
    threshold = forms.IntegerField(
        min_value=0,
        max_value=100000,
        initial=0,
        required=False,
        help_text="Days for “expiring” (default 14), minutes for “waiting for approval” "
        "(default 30); unused otherwise.",
    )
    name_pattern = forms.CharField(
        required=False, max_length=253, help_text="Only names matching, e.g. web-* (optional)."
    )
    issuer_pattern = forms.CharField(
        required=False, max_length=253, help_text="Only issuers matching (optional)."
    )

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"])
        if NotificationRule.objects.filter(name=name).exists():
            raise forms.ValidationError("A rule with this name exists.")
        return name


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
@viewer_required
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
        channels.save(
            channel,
            name,
            channels.ChannelInput(
                url=data["url"] or None,
                secret=data["secret"] or None,
                rate_limit_per_hour=data["rate_limit_per_hour"],
                digest_hour=data["digest_hour"],
                digest_hour_set=True,
            ),
            request.user.get_username(),
        )
    except channels.ChannelError as exc:
        for field, error in exc.errors.items():
            form.add_error(field if field in form.fields else None, error)
        return False
    return True


@require_POST
@admin_required
def channel_create(request: HttpRequest) -> HttpResponse:
    form = ChannelForm(request.POST)
    if form.is_valid() and _save_channel(request, form, None, form.cleaned_data["name"]):
        messages.success(request, f"Channel {form.cleaned_data['name']} added.")
        return redirect("web:notifications")
    return render_page(
        request, "console/notifications.html", _context(request, channel_form=form), status=400
    )


@never_cache
@admin_required
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
@admin_required
def channel_test(request: HttpRequest, name: str) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, name=name)
    channels.send_test(channel, request.user.get_username())
    messages.success(request, f"Test message queued for {name}: its result appears below.")
    return redirect("web:notifications")


@require_POST
@admin_required
def channel_toggle(request: HttpRequest, name: str) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, name=name)
    channels.save(
        channel,
        name,
        channels.ChannelInput(enabled=not channel.enabled),
        request.user.get_username(),
    )
    return redirect("web:notifications")


@require_POST
@admin_required
def channel_delete(request: HttpRequest, name: str) -> HttpResponse:
    channels.delete(get_object_or_404(NotificationChannel, name=name), request.user.get_username())
    messages.success(request, f"Channel {name} deleted (with its rules and deliveries).")
    return redirect("web:notifications")


@require_POST
@admin_required
def rule_create(request: HttpRequest) -> HttpResponse:
    form = RuleForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        with transaction.atomic():
            rule = NotificationRule.objects.create(
                name=data["name"],
                channel=data["channel"],
                condition=data["condition"],
                threshold=data["threshold"] or 0,
                name_pattern=data["name_pattern"],
                issuer_pattern=data["issuer_pattern"],
            )
            events.record(
                "NotificationRule",
                rule.name,
                "Created",
                f"Rule {rule.name}: {rule.get_condition_display()} → {rule.channel.name}",
                actor=request.user.get_username(),
            )
        messages.success(request, f"Rule {rule.name} added.")
        return redirect("web:notifications")
    return render_page(
        request, "console/notifications.html", _context(request, rule_form=form), status=400
    )


@require_POST
@admin_required
def rule_delete(request: HttpRequest, pk: int) -> HttpResponse:
    rule = get_object_or_404(NotificationRule, pk=pk)
    with transaction.atomic():
        rule.delete()
        events.record(
            "NotificationRule",
            rule.name,
            "Deleted",
            f"Rule {rule.name} deleted",
            actor=request.user.get_username(),
        )
    return redirect("web:notifications")
