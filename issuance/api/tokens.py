"""/api/v1/token/: a new API token for a username and password (anyone may ask)."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers, renderers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from issuance.api.query import QueryParamsMixin
from issuance.apitokens import create_token

OBTAINED_NAME = "from /api/v1/token/"


class ObtainTokenView(QueryParamsMixin, APIView):
    """A new API token for a username and password (anyone may ask; wrong credentials: 400).

    Each call creates a token (listed on the user's API tokens page, revocable there): the
    stored digest cannot give back an earlier one.
    """

    throttle_classes = ()
    permission_classes = [AllowAny]
    parser_classes = (parsers.FormParser, parsers.MultiPartParser, parsers.JSONParser)
    renderer_classes = (renderers.JSONRenderer,)
    serializer_class = AuthTokenSerializer

    def get_serializer(self, *args: Any, **kwargs: Any) -> AuthTokenSerializer:
        kwargs["context"] = {"request": self.request, "format": self.format_kwarg, "view": self}
        return AuthTokenSerializer(*args, **kwargs)

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = serializer.validated_data["user"]
        _, text = create_token(user, OBTAINED_NAME, actor=user.get_username())
        return Response({"token": text})
