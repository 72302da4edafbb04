"""RoleScope: limits a user's roles to clusters and namespaces (issuance/access/scope.py).

A user with no RoleScope rows is unscoped: their roles apply everywhere. A user with any
row sees and acts on mirrored objects in those clusters/namespaces only, and on none of the
console's own resources. `namespace` "" means every namespace of the cluster.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RoleScope(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_scopes"
    )
    cluster = models.ForeignKey(
        "issuance.Cluster", on_delete=models.CASCADE, related_name="role_scopes"
    )
    namespace = models.CharField(max_length=253, blank=True, default="")

    class Meta:
        ordering = ["cluster__name", "namespace"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "cluster", "namespace"], name="rolescope_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.namespace or '*'}"
