"""Reachability of a Kubernetes API server, stored so that every process can read it.

The process that talks to the API server (the cert-manager cluster sync, the CSR connector)
writes it; the notifications step of any worker reads it ("cluster unreachable"). An outage is
identified by its start (`unreachable_since`): the notification's instance, so one outage
is reported once however many processes and passes see it. When it ends, its start and end
are kept (`last_outage_since`, `reachable_again_at`) for the "resolved" message.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models


class Reachability(models.Model):
    # Set while the API server cannot be reached; null when it can.
    unreachable_since = models.DateTimeField(null=True, blank=True)
    # The last outage that ended: when it started and when it ended.
    last_outage_since = models.DateTimeField(null=True, blank=True)
    reachable_again_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def mark_reachable(self, reachable: bool, now: datetime) -> list[str]:
        """Start or end the outage; returns the fields that changed (for update_fields)."""
        if not reachable and self.unreachable_since is None:
            self.unreachable_since = now
            return ["unreachable_since"]
        if reachable and self.unreachable_since is not None:
            self.last_outage_since, self.reachable_again_at = self.unreachable_since, now
            self.unreachable_since = None
            return ["unreachable_since", "last_outage_since", "reachable_again_at"]
        return []


class KubeConnectorState(Reachability):
    """The CSR connector's connection to its API server (issuance/kubernetes/csr_connector/connector.py), one
    row per connector (`name`: "default", the one configured by KUBECONFIG)."""

    name = models.CharField(max_length=63, unique=True, default="default")
    connected = models.BooleanField(default=False)
    # Failed list/watch calls in a row (0 once connected), and the last one's error.
    failures = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"KubeConnector/{self.name}"
