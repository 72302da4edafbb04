"""Patterns the API checks with and the OpenAPI schema states: one regex for both.

Each pattern is written in the syntax JSON Schema's `pattern` (ECMA-262) and Python's `re`
share (no inline flags, no lookbehind, no `\\Z`), so a value the schema calls valid is one
the API takes, and the other way round (schemathesis checks both directions).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.drainage import set_override
from rest_framework.exceptions import ValidationError

from issuance.api.fields import StrictCharField

# -- http(s) URLs (issuance webhooks) -----------------------------------------------------------
# Django's URLValidator (which the model keeps) for http and https, written out for ASCII:
# a DNS name with a top-level domain, "localhost", an IPv4 or a bracketed IPv6 address; an
# optional user:password@, a port up to 65535, then a path without whitespace. Django also
# takes Unicode host names and upper-case schemes; the API asks for the punycode (xn--) form
# and "http"/"https" as written, so that the schema can state the whole rule.
_LABEL = "[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?"
# Two letters at least, as Django's (a one-letter top-level domain passed the schema and
# was refused by the model's validator: a contract run found it).
_TLD = "([a-zA-Z][-a-zA-Z]{0,61}[a-zA-Z]|xn--[a-zA-Z0-9]{1,59})"
_HOSTNAME = f"{_LABEL}(\\.{_LABEL})*\\.{_TLD}\\.?|localhost"
_OCTET = "(0|25[0-5]|2[0-4][0-9]|1[0-9]?[0-9]?|[1-9][0-9]?)"
_IPV4 = f"{_OCTET}(\\.{_OCTET}){{3}}"
_H16 = "[0-9a-fA-F]{1,4}"
_IPV6 = (
    f"({_H16}:){{7}}{_H16}|({_H16}:){{1,7}}:|({_H16}:){{1,6}}:{_H16}"
    f"|({_H16}:){{1,5}}(:{_H16}){{1,2}}|({_H16}:){{1,4}}(:{_H16}){{1,3}}"
    f"|({_H16}:){{1,3}}(:{_H16}){{1,4}}|({_H16}:){{1,2}}(:{_H16}){{1,5}}"
    f"|{_H16}:(:{_H16}){{1,6}}|:((:{_H16}){{1,7}}|:)"
)
# Whole addresses, for fields that take one (an endpoint's host).
IPV4_PATTERN = _IPV4
IPV6_PATTERN = _IPV6
_USERINFO = "[-a-zA-Z0-9._~%!$&'()*+,;=]+(:[-a-zA-Z0-9._~%!$&'()*+,;=]*)?@"
_PORT = "([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
HTTP_URL_PATTERN = (
    f"^https?://({_USERINFO})?({_IPV4}|\\[({_IPV6})\\]|{_HOSTNAME})(:{_PORT})?([/?#]\\S*)?$"
)
HTTP_URL_MESSAGE = (
    "must be an http:// or https:// URL with a host name (with a top-level domain, or "
    "localhost) or an IP address, an optional port up to 65535 and no whitespace"
)


# -- kubeconfigs (clusters) ---------------------------------------------------------------------
# What a pattern can say of a kubeconfig: YAML (or JSON) text with a top-level `clusters` key
# (at the start of a line, or after `{` or `,`). Unanchored, as JSON Schema patterns are: the
# API searches for it too. `contexts` and `users` would need lookaheads, which make a
# generator (schemathesis) filter its way to a match, ten times slower than the rest of the
# contract run; the description says they are needed, and validation names them. That the
# kubeconfig loads, and that the context names a cluster and a user it defines, is checked by
# issuance.kubernetes.certmanager.kubeconfig.validate (a 400 naming `kubeconfig` or `context`).
KUBECONFIG_PATTERN = "(^|[\\n{,])[ \\t]*[\"']?clusters[\"']?[ \\t]*:"
KUBECONFIG_MESSAGE = "must be a kubeconfig (YAML or JSON) with clusters, contexts and users"
KUBECONFIG_FORMAT = "kubeconfig"


class Matches:
    """Validator: `pattern` matches the whole value (an anchored pattern: re.match with `$`
    would let a trailing newline through), or is found in it (an unanchored one: JSON
    Schema's `pattern` is a search). Not a RegexValidator: drf-spectacular would show the
    pattern it compiles, and DRF's validator uses re.match."""

    def __init__(self, pattern: str, message: str) -> None:
        self.regex = re.compile(pattern)
        anchored = pattern.startswith("^") and pattern.endswith("$")
        self.test = self.regex.fullmatch if anchored else self.regex.search
        self.message = message

    def __call__(self, value: str) -> None:
        if not self.test(value):
            raise ValidationError(self.message)


class PatternField(StrictCharField):
    """A JSON string that must match `pattern` as a whole; the schema states the pattern.

    The schema is set in __init__, on the instance: DRF deep-copies declared fields by
    calling __init__ again, so it survives into every serializer instance."""

    def __init__(self, pattern: str, message: str, format: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(Matches(pattern, message))
        schema: dict[str, Any] = {"type": "string", "pattern": pattern}
        if format:
            schema["format"] = format
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        if self.min_length is not None:
            schema["minLength"] = self.min_length
        set_override(self, "field", schema)  # what extend_schema_field does to a class
