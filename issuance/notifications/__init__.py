"""Notifications: channels and rules (issuance.models.notification), detection of the
conditions (detect), delivery with rate limit, digest and retries (deliver), sending
through apprise or a signed JSON webhook (send), and the worker step (step)."""
