"""/api/v1/token/: a new API token for a username and password (anyone may ask)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import parsers, renderers, serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import PermissionDenied, Throttled
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from issuance.access import signin, two_factor
from issuance.access.apitokens import create_token
from issuance.api.query import QueryParamsMixin

OBTAINED_NAME = "from /api/v1/token/"
USERNAME_MAX = 150  # django.contrib.auth's User.username (tests check the two agree)


class ObtainTokenSerializer(AuthTokenSerializer):
    """DRF's body (username, password), with the username's length as Django stores it."""

    username = serializers.CharField(
        label="Username", write_only=True, max_length=USERNAME_MAX, help_text="A console user."
    )


class TokenEndpointThrottle(ScopedRateThrottle):
    """TOKEN_ENDPOINT_RATE per address, counted where the bad-token limits are (Redis with
    several processes)."""

    def __init__(self) -> None:
        from django.core.cache import caches

        self.cache = caches["throttle"]
        super().__init__()

    def get_ident(self, request: Request) -> str:
        return signin.client_address(request) or "unknown"


class ObtainTokenView(QueryParamsMixin, APIView):
    """A new API token for a username and password (anyone may ask; wrong credentials: 400).

    Each call creates a token (listed on the user's API tokens page, revocable there): the
    stored digest cannot give back an earlier one.
    """

    # Password guessing here shares the lock of the login page: the serializer calls
    # authenticate(request=...), where django-axes counts and refuses (console/settings.py).
    throttle_classes = (TokenEndpointThrottle,)
    throttle_scope = "token"
    extra_error_statuses = {"POST": (403, 429)}
    permission_classes = [AllowAny]
    parser_classes = (parsers.FormParser, parsers.MultiPartParser, parsers.JSONParser)
    renderer_classes = (renderers.JSONRenderer,)
    serializer_class = ObtainTokenSerializer

    def get_serializer(self, *args: Any, **kwargs: Any) -> AuthTokenSerializer:
        kwargs["context"] = {"request": self.request, "format": self.format_kwarg, "view": self}
        return ObtainTokenSerializer(*args, **kwargs)

    @extend_schema(
        description="A new API token for a username and password (anyone may ask). A "
        "username and password that do not match an active user are a 400 naming "
        "`non_field_errors` (the body names a user: the schema cannot say which exist). Each "
        "call creates a token (listed on the user's API tokens page, revocable there). "
        "After SIGNIN_FAILURE_LIMIT failed sign-ins (here, on the login page or /admin/) the "
        "account and the address are locked for SIGNIN_LOCK_TIME: 429 with `Retry-After`, "
        "right password or not; more than TOKEN_ENDPOINT_RATE calls from one address: 429. "
        "A user with a second factor (or one REQUIRE_2FA asks for one, or whose password an "
        "admin set and who has not changed it) gets 403: a password alone is not enough, and "
        "such users create tokens in the console after signing in there."
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not settings.LOCAL_LOGIN:
            # Single sign-on only (LOCAL_LOGIN=0): no password is checked; tokens made on the
            # API tokens page keep working.
            raise PermissionDenied(
                "Password sign-in is turned off (LOCAL_LOGIN=0): sign in to the console "
                "through single sign-on and make a token on your API tokens page."
            )
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            if getattr(request, "axes_locked_out", False):
                left = signin.lock_remaining(
                    str(request.data.get("username", "")), signin.client_address(request)
                )
                raise Throttled(
                    wait=max(left.total_seconds(), 1),
                    detail="Too many failed sign-ins: this account or this address is locked.",
                )
            serializer.is_valid(raise_exception=True)
        user = serializer.validated_data["user"]
        refusal = two_factor.password_exchange_refusal(user)
        if refusal is not None:
            raise PermissionDenied(refusal)
        _, text = create_token(user, OBTAINED_NAME, actor=user.get_username())
        return Response({"token": text})
