from __future__ import annotations

from rest_framework.permissions import IsAuthenticated


class RolePermission(IsAuthenticated):
    """Placeholder until the API lands: authenticated users only."""
