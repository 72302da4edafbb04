"""Notifications: channels and rules (issuance.models.notification; changed through
`channel_store` and `rules`, channel URLs checked by `channel_urls`), detection of the
conditions (detect), delivery with rate limit, digest and retries (deliver), sending
through apprise or a signed JSON webhook (send, signed by `webhook_signing`), and the worker
step (step). Issuance webhooks (`webhooks`: a notice per new revision, POSTed by
controllers/webhookdeliveries.py) are signed the same way."""
