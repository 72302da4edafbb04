"""KubeCSR: a Kubernetes CertificateSigningRequest mirrored into the approval queue.

One row per CSR uid (mirroring is idempotent); it links the CSR to its CertificateRequest
and remembers what was written back, so a restarted connector neither writes twice nor
forgets a decision.
"""

from __future__ import annotations

from django.db import models


class KubeCSR(models.Model):
    uid = models.CharField(max_length=64, unique=True)
    csr_name = models.CharField(max_length=253)
    request = models.OneToOneField(
        "issuance.CertificateRequest", on_delete=models.CASCADE, related_name="kube_csr"
    )
    signer_name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64, blank=True, default="")
    # The decision the CSR carries in the cluster ("", Approved, Denied), written or seen.
    cluster_decision = models.CharField(max_length=16, blank=True, default="")
    certificate_written = models.BooleanField(default=False)
    deleted = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"CertificateSigningRequest/{self.csr_name}"
