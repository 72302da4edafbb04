"""DRF authentication for bootstrap tokens: `Authorization: Bearer <id>.<secret>`.

Only the bootstrap API uses this class, so a bootstrap token opens nothing else: the
main API does not know the Bearer scheme and answers 401.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from issuance.access import signin
from issuance.bootstrap.tokens import authenticate
from issuance.models import BootstrapToken


@dataclass(frozen=True)
class BootstrapClient:
    """The authenticated caller: not a console user, holds no role."""

    token: BootstrapToken
    is_authenticated: ClassVar[bool] = True
    is_anonymous: ClassVar[bool] = False
    is_active: ClassVar[bool] = True
    is_staff: ClassVar[bool] = False
    is_superuser: ClassVar[bool] = False

    @property
    def username(self) -> str:
        return self.token.username

    @property
    def groups_list(self) -> list[str]:
        return self.token.all_groups

    def __str__(self) -> str:
        return self.username


class BootstrapTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"
    # Too many bad tokens from one address: 429 (issuance.access.signin; the schema documents it).
    limits_bad_tokens = True

    def authenticate(self, request: Request) -> tuple[BootstrapClient, BootstrapToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("Authorization: Bearer <token id>.<token secret>")
        # Checked before the lookup, so a limited address learns nothing from a right guess.
        signin.check_token_address(request)
        token = authenticate(parts[1].decode("latin-1"))
        if token is None:
            signin.token_failed(request, "bootstrap")
            raise AuthenticationFailed("Invalid, expired or revoked bootstrap token.")
        return BootstrapClient(token), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="issuance-bootstrap"'


class IsBootstrapClient(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, BootstrapClient)
