from __future__ import annotations

from django.contrib import admin
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from issuance.models import (
    AcmeServer,
    Certificate,
    CertificateRequest,
    Challenge,
    Event,
    Issuer,
    Order,
)


@admin.register(Issuer)
class IssuerAdmin(admin.ModelAdmin[Issuer]):
    list_display = ("name", "kind", "created_at")
    exclude = ("acme_account_key_ciphertext",)


@admin.register(Certificate)
class CertificateAdmin(admin.ModelAdmin[Certificate]):
    list_display = ("name", "issuer", "state", "not_after", "renewal_time", "next_retry_time")
    list_filter = ("state",)
    search_fields = ("name", "search_text")
    exclude = ("next_private_key_ciphertext",)


@admin.register(CertificateRequest)
class CertificateRequestAdmin(admin.ModelAdmin[CertificateRequest]):
    list_display = ("name", "issuer", "approval", "state", "created_at")
    list_filter = ("approval", "state")


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin[Order]):
    list_display = ("name", "issuer", "state", "created_at")


@admin.register(Challenge)
class ChallengeAdmin(admin.ModelAdmin[Challenge]):
    list_display = ("name", "dns_name", "type", "processing", "state", "created_at")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = ("created_at", "kind", "name", "type", "reason", "actor")


admin.site.register(AcmeServer)


# django-otp's plugins show their devices (a TOTP secret, static tokens) on the admin site.
# The console's factors are issuance.TOTPFactor and RecoveryCodeSet, which are not listed here
# at all; the plugins stay installed only for migration 0020, which moved their rows over,
# and their (empty) tables are kept off the admin site.
for _plugin_model in (TOTPDevice, StaticDevice):
    if admin.site.is_registered(_plugin_model):
        admin.site.unregister(_plugin_model)
