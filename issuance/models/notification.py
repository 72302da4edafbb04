"""Notifications: channels (an apprise URL, stored encrypted), rules (which conditions go to
which channel) and Notification rows (one per channel, subject, condition and condition
instance: the dedup key; each row is also its delivery and its result)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from issuance.models.base import validate_resource_name
from issuance.pki.encryption import decrypt_text, encrypt_text


class NotificationCondition(models.TextChoices):
    ISSUANCE_FAILED = "issuance_failed", "Issuance failed"
    BACKOFF = "backoff", "Entered failure backoff"
    EXPIRING = "expiring", "Expiring with no successful renewal"
    RENEWAL_OVERDUE = "renewal_overdue", "Renewal overdue"
    APPROVAL_WAITING = "approval_waiting", "CSR waiting for approval"
    CA_PAUSED = "ca_paused", "CA paused or rate limited"
    ARI_MOVED = "ari_moved", "ARI window moved earlier"
    # The CSR connector or a cert-manager Cluster (issuance/notifications/detect.py).
    CLUSTER_UNREACHABLE = "cluster_unreachable", "Cluster unreachable"
    # What an endpoint of a Certificate serves (issuance/probing/; detect.py).
    ENDPOINT_STALE = "endpoint_stale", "Served certificate stale"
    ENDPOINT_UNREACHABLE = "endpoint_unreachable", "Endpoint unreachable"
    ENDPOINT_MISMATCH = "endpoint_mismatch", "Served chain or hostname mismatch"
    ENDPOINT_EXPIRING = "endpoint_expiring", "Served certificate expiring"
    TEST = "test", "Test message"
    DIGEST = "digest", "Daily digest"


# Former condition values, still accepted where a condition is read (rules stored before
# migration 0018 renamed them, or written by a process of the version before it, clients
# and manifests that name them); new rows get the current value.
LEGACY_CONDITIONS = {"kube_disconnected": NotificationCondition.CLUSTER_UNREACHABLE}


def canonical_condition(value: str) -> str:
    """The current value of a condition value, former ones included ("kube_disconnected")."""
    return LEGACY_CONDITIONS.get(value, value)


class DeliveryState(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    RETRYING = "retrying"
    FAILED = "failed"
    # Held for the channel's daily digest (digest channels, or over the rate limit there).
    DIGEST = "digest"
    # Included in a digest that was sent.
    DIGESTED = "digested"


class NotificationChannel(models.Model):
    name = models.CharField(max_length=253, unique=True, validators=[validate_resource_name])
    url_ciphertext = models.TextField()
    # What may be shown after saving: the scheme and a masked host (e.g. "mailto://ma***").
    url_hint = models.CharField(max_length=64, blank=True, default="")
    # For signed JSON webhooks (webhook+https://…): the HMAC key, encrypted.
    secret_ciphertext = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    rate_limit_per_hour = models.PositiveIntegerField(default=20)
    # Daily digest: at most one summary a day at this UTC hour, instead of each message.
    digest_hour = models.PositiveSmallIntegerField(null=True, blank=True)
    last_digest_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"NotificationChannel/{self.name}"

    @property
    def url(self) -> str:
        return decrypt_text(self.url_ciphertext) if self.url_ciphertext else ""

    @url.setter
    def url(self, value: str) -> None:
        from issuance.notifications.channel_urls import mask

        self.url_ciphertext = encrypt_text(value)
        self.url_hint = mask(value)

    @property
    def secret(self) -> str:
        return decrypt_text(self.secret_ciphertext) if self.secret_ciphertext else ""

    @secret.setter
    def secret(self, value: str) -> None:
        self.secret_ciphertext = encrypt_text(value) if value else ""


class NotificationRule(models.Model):
    name = models.CharField(max_length=253, unique=True, validators=[validate_resource_name])
    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="rules")
    condition = models.CharField(max_length=32, choices=NotificationCondition.choices)
    # Days (expiring, served certificate expiring), minutes (approval waiting, cluster and
    # endpoint unreachable); unused otherwise.
    threshold = models.PositiveIntegerField(default=0)
    # Optional fnmatch pattern on the certificate (or request) name and on the issuer name.
    name_pattern = models.CharField(max_length=253, blank=True, default="")
    issuer_pattern = models.CharField(max_length=253, blank=True, default="")
    # Also send a message when the condition ends (cluster unreachable: reachable again; the
    # endpoint conditions: the endpoint serves well again, or was removed).
    notify_resolved = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"NotificationRule/{self.name}"


class Notification(models.Model):
    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="notifications"
    )
    rule = models.ForeignKey(
        NotificationRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    condition = models.CharField(max_length=32, choices=NotificationCondition.choices)
    subject = models.CharField(max_length=300)  # e.g. "Certificate/web"
    instance = models.CharField(max_length=200)  # what makes the condition new (attempt 3, …)
    title = models.CharField(max_length=250)
    body = models.TextField()
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(blank=True, default="")
    sent_at = models.DateTimeField(null=True, blank=True)
    attempted_at = models.DateTimeField(null=True, blank=True)  # the last attempt
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "condition", "subject", "instance"],
                name="notification_once",
            )
        ]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="notification_due"),
            models.Index(fields=["channel", "sent_at"], name="notification_sent"),
        ]

    def __str__(self) -> str:
        return f"Notification/{self.pk} {self.condition} {self.subject}"
