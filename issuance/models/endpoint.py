"""Endpoint: a server (host:port, SNI name, protocol) that should serve a Certificate, and
what it served at the last probe (issuance/probing/; decision 0010-endpoints-as-rows-probe).

A row of its own, not a field of the Certificate's spec: adding or removing a server is not
a change of the certificate (no new generation, no reissue), and probe results are written
by the probe threads without touching the Certificate row the controllers lease.
"""

from __future__ import annotations

from typing import cast

from django.db import models
from django.utils import timezone

from issuance.shapes import EndpointProbe


class EndpointProtocol(models.TextChoices):
    TLS = "tls", "TLS"
    SMTP = "smtp", "SMTP (STARTTLS)"
    IMAP = "imap", "IMAP (STARTTLS)"
    POP3 = "pop3", "POP3 (STARTTLS)"


class Endpoint(models.Model):
    certificate = models.ForeignKey(
        "issuance.Certificate", on_delete=models.CASCADE, related_name="endpoints"
    )
    host = models.CharField(max_length=253)
    port = models.PositiveIntegerField()
    # The SNI name sent and the name the certificate must cover; "" = the host.
    server_name = models.CharField(max_length=253, blank=True, default="")
    protocol = models.CharField(
        max_length=8, choices=EndpointProtocol.choices, default=EndpointProtocol.TLS
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.CharField(max_length=150, blank=True, default="")

    # Scheduling: due when next_probe_at has come and no probe holds it (a worker that
    # takes it sets claimed_until; one that dies lets it go when that passes).
    next_probe_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True)

    # The last probe: the whole record, and its verdict in columns for lists and changes.
    probed_at = models.DateTimeField(null=True, blank=True)
    last_probe = models.JSONField(null=True, blank=True)
    # current, previous, foreign, error; "" before the first probe.
    match = models.CharField(max_length=16, blank=True, default="")
    served_revision = models.PositiveIntegerField(null=True, blank=True)
    served_fingerprint = models.CharField(max_length=64, blank=True, default="")
    # Since when it serves what it serves now (the first probe that saw it).
    served_since = models.DateTimeField(null=True, blank=True)
    # When the certificate's current revision was stored (set with the wake-up of a new
    # revision): an older revision still served an hour after it is stale.
    revision_issued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["host", "port", "server_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["certificate", "host", "port", "server_name"],
                name="one_endpoint_per_address",
            )
        ]
        indexes = [models.Index(fields=["next_probe_at"], name="endpoint_due")]

    def __str__(self) -> str:
        return self.address

    @property
    def address(self) -> str:
        """host:port as people write it ([v6]:port), with the SNI name when it differs."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = f"{host}:{self.port}"
        if self.server_name and self.server_name != self.host:
            text += f" ({self.server_name})"
        return text

    @property
    def name_checked(self) -> str:
        """The name sent as SNI and looked for in the certificate."""
        return self.server_name or self.host

    @property
    def typed_last_probe(self) -> EndpointProbe | None:
        return cast(EndpointProbe, self.last_probe) if self.last_probe else None
