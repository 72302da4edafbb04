"""AcmeServer: per-CA state shared by all issuers that talk to it.

Two things are kept per directory URL, so every worker on every host honours them:
- a pause the CA asked for (429, rateLimited, Retry-After): no request before `paused_until`;
- reachability: after a network-level failure (refused, reset, timed out) the CA is
  unreachable since `unreachable_since`; one probe at a time (`probe_at`) finds out when it
  answers again, and the first answer clears it.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AcmeServer(models.Model):
    directory_url = models.CharField(max_length=1024, unique=True)
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True, default="")
    # Set while the CA does not answer; null when it does.
    unreachable_since = models.DateTimeField(null=True, blank=True)
    # The last network error (kept after the outage, as its summary).
    unreachable_error = models.TextField(blank=True, default="")
    # Requests that failed in the current outage (or the last one, once it is over).
    failed_requests = models.PositiveIntegerField(default=0)
    # Failed probes in the current outage: the probe interval grows with them.
    probes = models.PositiveIntegerField(default=0)
    # No probe before this moment (the next probe, or the end of the running probe's lease).
    probe_at = models.DateTimeField(null=True, blank=True)
    # When the last outage ended.
    reachable_again_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.directory_url
