"""Token authentication for the REST API: DRF's, with its one query compiled once per thread.

Every API call authenticates, and compiling `Token.objects.select_related("user")
.get(key=…)` cost Django more CPU than running it (a fifth of a certificate create in a
py-spy profile of bulk issuance). Same rows, same model instances, same errors.

Measured (docs/decisions/0004-bypasses.md): DRF's TokenAuthentication costs the web process
0.4 ms more per certificate, 7 % of its CPU (5.3 ms), a borderline figure within the run-to-
run noise. It becomes unnecessary if DRF's token lookup is compiled once.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from issuance.fastpaths.compiled_query import compiled

# Never a token key (keys are hex): marks the key's place in the compiled parameters.
_STAND_IN = "\x00token-key\x00"


def _token_query(key: str) -> QuerySet[Token]:
    return Token.objects.select_related("user").filter(key=key)


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, exactly as rest_framework's (headers, errors)."""

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Any]:
        if self.get_model() is not Token:  # a subclass with its own model: DRF's way
            return super().authenticate_credentials(key)
        found = compiled("api-token", _token_query, _STAND_IN).fetch(key)
        if not found:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token: Any = found[0]
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return (token.user, token)
