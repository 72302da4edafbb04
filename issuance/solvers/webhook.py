"""DNS-01 via a webhook: POST the record to change to an HTTP endpoint that talks to the DNS.

Config: `dns01.webhook {url}` (our simplification of cert-manager's webhook solver: plain
HTTP(S) JSON instead of a Kubernetes API service). Body:

    {"action": "present" | "cleanup", "dnsName": "www.example.test",
     "fqdn": "_acme-challenge.www.example.test.", "value": "<TXT value>"}

Any 2xx is success; anything else, a timeout or a connection error is a TemporaryError
(the worker backs off and retries). The endpoint must treat repeated calls as no-ops.
"""

from __future__ import annotations

import requests

from issuance.controllers.base import TemporaryError
from issuance.models import Challenge
from issuance.shapes import WebhookSpec
from issuance.solvers.base import (
    SolverConfigError,
    base_domain,
    txt_record_name,
    txt_value,
)
from issuance.solvers.selfcheck import check_dns01

TIMEOUT = 15.0


class WebhookSolver:
    name = "webhook"
    cleanup_in_database = False

    def __init__(self, config: WebhookSpec) -> None:
        self.url = str(config.get("url") or "")
        if not self.url.startswith(("http://", "https://")):
            raise SolverConfigError(f"dns01.webhook.url {self.url!r} must be an http(s) URL")

    def payload(self, challenge: Challenge, action: str) -> dict[str, str]:
        return {
            "action": action,
            "dnsName": base_domain(challenge.dns_name),
            "fqdn": txt_record_name(challenge.dns_name),
            "value": txt_value(challenge),
        }

    def _post(self, challenge: Challenge, action: str) -> None:
        try:
            response = requests.post(
                self.url, json=self.payload(challenge, action), timeout=TIMEOUT
            )
        except requests.RequestException as exc:
            raise TemporaryError(f"webhook {action} at {self.url} failed: {exc}") from exc
        if not 200 <= response.status_code < 300:
            body = response.text[:200].strip()
            raise TemporaryError(
                f"webhook {action} at {self.url} answered HTTP {response.status_code}"
                + (f": {body}" if body else "")
            )

    def present(self, challenge: Challenge) -> None:
        self._post(challenge, "present")

    def cleanup(self, challenge: Challenge) -> None:
        self._post(challenge, "cleanup")

    def self_check(self, challenge: Challenge) -> str | None:
        return check_dns01(txt_record_name(challenge.dns_name), txt_value(challenge))
