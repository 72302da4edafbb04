"""/api/v1/signin-locks/: the accounts and addresses locked after failed sign-ins, and
lifting a lock (admin only; the console's Users → Sign-in locks page, issuance/access/signin.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import signin
from issuance.api.common import ApiViewSet


class SignInLockSerializer(serializers.Serializer[signin.Lock]):
    id = serializers.SerializerMethodField(help_text="`account:<username>` or `address:<ip>`.")
    what = serializers.ChoiceField(choices=[signin.ACCOUNT, signin.ADDRESS], read_only=True)
    value = serializers.CharField(read_only=True, help_text="The username or the address.")
    failures = serializers.IntegerField(read_only=True)
    last_failure = serializers.DateTimeField(read_only=True)
    locked_until = serializers.DateTimeField(read_only=True)

    def get_id(self, lock: signin.Lock) -> str:
        return f"{lock.what}:{lock.value}"


class SignInLockViewSet(ApiViewSet):
    """Sign-in locks (admin only)."""

    serializer_class = SignInLockSerializer
    pagination_class = None
    lookup_field = "id"
    lookup_value_regex = r"(account|address):[^/]+"
    http_method_names = ["get", "delete", "head", "options"]
    resource = "signin-lock"
    permission_actions = {"destroy": "lift"}

    @extend_schema(description="The accounts and addresses locked now, newest failure first.")
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(self.get_serializer(signin.current_locks(), many=True).data)

    @extend_schema(
        description="Lifts a lock: forgets the failures of that account or address (audited)."
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        what, _, value = str(kwargs["id"]).partition(":")
        if not any(lock.what == what and lock.value == value for lock in signin.current_locks()):
            raise NotFound("No such lock.")
        signin.lift(what, value, actor=request.user.get_username())
        return Response(status=status.HTTP_204_NO_CONTENT)
