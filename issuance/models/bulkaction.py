"""BulkAction: one person's action on many certificates (renew or delete), item by item.

Why a stored record and not one long request: 1000 certificates must not hold a web request
(and a database transaction) open, and a crash half-way must not forget which certificates
were already done. The action is stored with one BulkItem per certificate; it is carried
out in chunks (issuance/operations/bulk.py), each chunk in its own short transaction that stores every
item's result together with the progress counters, so whatever committed is known to be done
and a resumed action goes on with the items still pending.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


class BulkKind(models.TextChoices):
    RENEW = "renew", "Renew"
    DELETE = "delete", "Delete"


class ItemState(models.TextChoices):
    PENDING = "pending", "Pending"
    OK = "ok", "OK"
    ERROR = "error", "Error"


class BulkAction(models.Model):
    # A random id: it names the action's live topic (bulk:<id>) and its page.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=BulkKind.choices)
    actor = models.CharField(max_length=150)
    delete_secrets = models.BooleanField(default=False)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"BulkAction/{self.kind} {self.done}/{self.total}"

    @property
    def percent(self) -> int:
        return 100 if not self.total else self.done * 100 // self.total


class BulkItem(models.Model):
    action = models.ForeignKey(BulkAction, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    certificate_name = models.CharField(max_length=253)
    state = models.CharField(max_length=8, choices=ItemState.choices, default=ItemState.PENDING)
    message = models.CharField(max_length=1000, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["action", "position"]
        constraints = [
            models.UniqueConstraint(fields=["action", "position"], name="bulkitem_position"),
        ]
        indexes = [models.Index(fields=["action", "state", "position"], name="bulkitem_next")]

    def __str__(self) -> str:
        return f"{self.certificate_name}: {self.state}"
