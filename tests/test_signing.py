"""Webhook signatures: what a receiver checks."""

from __future__ import annotations

from issuance.notifications import webhook_signing


def test_a_signed_body_verifies_and_any_change_does_not() -> None:
    secret = b"s3cret"
    body = webhook_signing.body_of({"certificate": "web", "serial": "0a"})
    headers = webhook_signing.signed_headers(secret, body, now=1_000_000)
    assert webhook_signing.verify(secret, body, headers, now=1_000_010)
    assert not webhook_signing.verify(b"other", body, headers, now=1_000_010)
    assert not webhook_signing.verify(secret, body + b" ", headers, now=1_000_010)
    replayed = {**headers, webhook_signing.TIMESTAMP_HEADER: "1000500"}
    assert not webhook_signing.verify(secret, body, replayed, now=1_000_500)
    assert not webhook_signing.verify(secret, body, headers, now=1_000_000 + 301)
    assert not webhook_signing.verify(secret, body, {}, now=1_000_000)
