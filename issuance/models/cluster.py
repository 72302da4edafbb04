"""Cluster: a Kubernetes cluster running cert-manager whose resources the console mirrors.

The kubeconfig is stored encrypted (KEY_ENCRYPTION_KEY, like private keys) and is never
shown again. The sync (issuance/kubernetes/certmanager/sync.py) writes the connection state, the
cert-manager API versions it found and the permissions it lacks; one worker at a time holds
a cluster's sync lease (`sync_owner`, `sync_lease_until`), so two workers never watch the
same cluster twice. `unreachable_since` and the last outage (Reachability) follow `state`:
save() keeps them, so every writer of the state (the sync, `manage.py cluster check`) does.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from issuance.models.reachability import Reachability
from issuance.pki.encryption import decrypt_text, encrypt_text

# cert-manager's defaults (its controller flags --min/--max... backoff): 1 h, doubling, 32 h.
DEFAULT_MIN_BACKOFF_SECONDS = 3600
DEFAULT_MAX_BACKOFF_SECONDS = 32 * 3600


class ClusterState(models.TextChoices):
    PENDING = "Pending", "Pending"  # added, not contacted yet
    CONNECTED = "Connected", "Connected"
    UNREACHABLE = "Unreachable", "Unreachable"  # connection refused, timeout, TLS
    UNAUTHORIZED = "Unauthorized", "Unauthorized"  # 401/403 on discovery
    NO_CERT_MANAGER = "NoCertManager", "cert-manager not found"


class Cluster(Reachability):
    name = models.SlugField(max_length=63, unique=True)
    kubeconfig_ciphertext = models.TextField(blank=True, default="")
    # In-cluster: the console's own ServiceAccount (token, CA and API server of the pod it
    # runs in, issuance/kubernetes/certmanager/in_cluster.py) instead of a kubeconfig.
    in_cluster = models.BooleanField(default=False)
    context = models.CharField(max_length=253, blank=True, default="")
    # cert-manager's issuance backoff, for an operator who changed its flags.
    min_backoff_seconds = models.PositiveIntegerField(default=DEFAULT_MIN_BACKOFF_SECONDS)
    max_backoff_seconds = models.PositiveIntegerField(default=DEFAULT_MAX_BACKOFF_SECONDS)
    state = models.CharField(
        max_length=16, choices=ClusterState.choices, default=ClusterState.PENDING
    )
    last_error = models.TextField(blank=True, default="")
    last_sync = models.DateTimeField(null=True, blank=True)  # last event or list applied
    checked_at = models.DateTimeField(null=True, blank=True)  # last discovery + access review
    # e.g. ["cert-manager.io/v1", "acme.cert-manager.io/v1"]
    api_versions = models.JSONField(default=list, blank=True)
    # e.g. ["watch certificates.cert-manager.io", "approve signers.cert-manager.io"]
    missing_permissions = models.JSONField(default=list, blank=True)
    sync_owner = models.CharField(max_length=128, blank=True, default="")
    sync_lease_until = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"Cluster/{self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The outage follows the state here rather than in each writer, so that no writer
        # can change the state and forget it (the notification reads only these fields).
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "state" in update_fields:
            reachable = self.state != ClusterState.UNREACHABLE
            changed = self.mark_reachable(reachable, timezone.now())
            if changed and update_fields is not None:
                kwargs["update_fields"] = [*update_fields, *changed]
        super().save(*args, **kwargs)

    @property
    def kubeconfig(self) -> str:
        return decrypt_text(self.kubeconfig_ciphertext) if self.kubeconfig_ciphertext else ""

    @kubeconfig.setter
    def kubeconfig(self, text: str) -> None:
        # A kubeconfig given to an in-cluster cluster (edit form, API) is what it speaks with
        # from then on: save in_cluster with kubeconfig_ciphertext.
        self.kubeconfig_ciphertext = encrypt_text(text)
        self.in_cluster = False
