"""The http(s) URL pattern the schema states (issuance.api.patterns) and the validator the
issuance webhook model keeps (Django's URLValidator) agree: a URL the schema calls valid is
stored. (A contract run once sent `http://user@L.o:60028`: one-letter top-level domains
passed the pattern and the model refused them.)"""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from issuance.api.patterns import HTTP_URL_PATTERN
from issuance.models.issuancewebhook import validate_webhook_url


@settings(max_examples=300, deadline=None)
@given(st.from_regex(HTTP_URL_PATTERN, fullmatch=True))
def test_every_url_the_schema_allows_is_valid_for_the_model(url: str) -> None:
    validate_webhook_url(url)


@pytest.mark.parametrize(
    "url", ["http://user@example.o:60028", "http://a.-bc", "http://a.bc-", "ftp://a.bc"]
)
def test_urls_the_model_refuses_the_schema_refuses(url: str) -> None:
    with pytest.raises(ValidationError):
        validate_webhook_url(url)
    assert not re.fullmatch(HTTP_URL_PATTERN, url)
