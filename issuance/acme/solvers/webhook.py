"""DNS-01 via a webhook: POST the record to change to an HTTP endpoint that talks to the DNS.

Config: `dns01.webhook {url}` (our simplification of cert-manager's webhook solver: plain
HTTP(S) JSON instead of a Kubernetes API service), or cert-manager's own form
`{groupName, solverName, config}` with the URL taken from ACME_WEBHOOK_SOLVERS
(`groupName/solverName=URL;…`). Body:

    {"action": "present" | "cleanup", "dnsName": "www.example.test",
     "fqdn": "_acme-challenge.www.example.test.", "value": "<TXT value>",
     "groupName": …, "solverName": …, "config": {…}}   (the last three when given)

Any 2xx is success; anything else, a timeout or a connection error is a TemporaryError
(the worker backs off and retries). The endpoint must treat repeated calls as no-ops.
"""

from __future__ import annotations

from typing import Any

import requests

from issuance import environment as env
from issuance.acme.solvers.base import SolverConfigError, base_domain, txt_record_name, txt_value
from issuance.acme.solvers.selfcheck import check_dns01
from issuance.controllers.base import TemporaryError
from issuance.models import Challenge
from issuance.shapes import WebhookSpec

TIMEOUT = 15.0


class MappingError(ValueError):
    """ACME_WEBHOOK_SOLVERS is not `groupName/solverName=URL;…`."""


def solver_urls(raw: str | None = None) -> dict[str, str]:
    """ACME_WEBHOOK_SOLVERS as {"groupName/solverName": URL}; read at each use, so a change
    needs no restart of the code that reads it (the worker reads the environment it has)."""
    text = env.ACME_WEBHOOK_SOLVERS.value() if raw is None else raw
    out: dict[str, str] = {}
    for number, entry in enumerate((e.strip() for e in text.split(";")), start=1):
        if not entry:
            continue
        key, sep, url = (part.strip() for part in entry.partition("="))
        if not sep or key.count("/") < 1 or not url.startswith(("http://", "https://")):
            raise MappingError(
                f"ACME_WEBHOOK_SOLVERS, entry {number} ({entry!r}): expected "
                "groupName/solverName=http(s)://…"
            )
        out[key] = url
    return out


def mapping_key(config: WebhookSpec) -> str:
    return f"{config.get('groupName', '')}/{config.get('solverName', '')}"


def url_of(config: WebhookSpec) -> str | None:
    """The URL this webhook block is called at: its own `url`, or the mapping's for its
    groupName/solverName; None when there is neither."""
    if config.get("url"):
        return str(config["url"])
    return solver_urls().get(mapping_key(config))


def missing_url(config: WebhookSpec) -> str | None:
    """Why this block cannot be called here, or None when it can."""
    try:
        if url_of(config):
            return None
    except MappingError as exc:
        return str(exc)
    return (
        f"no URL for webhook {mapping_key(config)}: cert-manager calls it as a Kubernetes API "
        "service, this console over HTTP; map it in ACME_WEBHOOK_SOLVERS "
        "(groupName/solverName=https://…) or give url in this block"
    )


class WebhookSolver:
    name = "webhook"
    cleanup_in_database = False

    def __init__(self, config: WebhookSpec) -> None:
        problem = missing_url(config)
        if problem:
            raise SolverConfigError(f"dns01.webhook: {problem}")
        self.url = str(url_of(config))
        if not self.url.startswith(("http://", "https://")):
            raise SolverConfigError(f"dns01.webhook.url {self.url!r} must be an http(s) URL")
        # cert-manager's own fields, passed on so one endpoint can serve several solvers.
        self.extra: dict[str, Any] = {
            key: config[key]  # type: ignore[literal-required]
            for key in ("groupName", "solverName", "config")
            if key in config
        }

    def payload(self, challenge: Challenge, action: str) -> dict[str, Any]:
        return {
            "action": action,
            "dnsName": base_domain(challenge.dns_name),
            "fqdn": txt_record_name(challenge.dns_name),
            "value": txt_value(challenge),
            **self.extra,
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
