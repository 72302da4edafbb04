"""ACME (RFC 8555) client for the controllers: one call = one request, plain dicts back.

Requests are signed with josepy keys and algorithms (jws.py) and sent by transport.py
(nonce pool; urllib3 pools or requests); the `acme` library builds the EAB. This layer adds:

- every failure maps to TemporaryError / AcmeProblemError (issuance.acme.errors);
- badNonce is retried here with a fresh nonce (Pebble rejects 5 % of good nonces);
- a CA's 429 / rateLimited / Retry-After pauses the whole CA (ratelimit.py), and no call
  is made while it is paused;
- every request has a timeout (connect 10 s, read 30 s) and is not repeated when it times
  out: a CA that does not answer is recorded as unreachable (health.py) and asked again by
  one probe, not by every waiting item (repeating held a worker thread twice as long, and
  a repeated newOrder could create a second order; see controllers/orders.py for recovery);
- one client (and its keep-alive connections) per issuer account, shared by the worker's
  threads.
"""

from __future__ import annotations

import atexit
import base64
import collections
import hashlib
import json
import logging
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import requests
from acme import messages
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.utils import timezone
from josepy.jwk import JWK
from requests.utils import parse_header_links

from issuance.acme import health, ratelimit
from issuance.acme.certs import ari_cert_id, chain_matches, parse_renewal_info
from issuance.acme.errors import (
    BAD_NONCE,
    RATE_LIMITED,
    AcmeProblemError,
    AcmeTemporaryError,
    problem_type,
)
from issuance.acme.jws import Signer, b64
from issuance.acme.transport import Network
from issuance.controllers.base import TemporaryError
from issuance.metrics import ACME_REQUESTS, ACME_SERVER_REQUESTS

log = logging.getLogger("issuance.acme")

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
# A probe is a GET of the directory, which any CA answers at once.
PROBE_READ_TIMEOUT = 10.0
BAD_NONCE_RETRIES = 5
USER_AGENT = "issuance-console"
PEM_CHAIN = "application/pem-certificate-chain"

# In-process counts (tests and the benchmark read them; /metrics reads ACME_REQUESTS).
_stats: collections.Counter[str] = collections.Counter()
_server_stats: collections.Counter[tuple[str, str]] = collections.Counter()
_stats_lock = threading.Lock()


# The metrics' children by labels: labels() validates and locks on every call.
_children: dict[tuple[str, str], Any] = {}
_server_children: dict[tuple[str, str], Any] = {}


def _count(directory_url: str, action: str, result: str) -> None:
    child = _children.get((action, result))
    if child is None:
        child = _children[(action, result)] = ACME_REQUESTS.labels(action=action, result=result)
    child.inc()
    server_child = _server_children.get((directory_url, result))
    if server_child is None:
        server_child = _server_children[(directory_url, result)] = ACME_SERVER_REQUESTS.labels(
            server=directory_url, result=result
        )
    server_child.inc()
    with _stats_lock:
        _stats[result] += 1
        _server_stats[(directory_url, result)] += 1


def stats() -> dict[str, int]:
    """Requests by result in this process, e.g. {"ok": 120, "bad_nonce": 6}."""
    with _stats_lock:
        return dict(_stats)


def server_stats(directory_url: str) -> dict[str, int]:
    """Requests sent to one CA by result in this process, e.g. {"ok": 80, "timeout": 2}."""
    with _stats_lock:
        return {r: n for (url, r), n in _server_stats.items() if url == directory_url}


@dataclass(frozen=True)
class TLSOptions:
    ca_bundle_b64: str = ""
    skip_verify: bool = False

    def verify(self) -> bool | str:
        if self.skip_verify:
            return False
        if not self.ca_bundle_b64:
            return True
        return _ca_bundle_path(self.ca_bundle_b64)


_bundle_lock = threading.Lock()
_bundle_paths: dict[str, str] = {}
_bundle_dir: str | None = None


def _ca_bundle_path(ca_bundle_b64: str) -> str:
    """requests wants a file: each distinct caBundle is written once per process, into a
    private (0700) directory, never a predictable shared path someone else could plant."""
    global _bundle_dir  # noqa: PLW0603 - one lazily made directory per process
    with _bundle_lock:
        path = _bundle_paths.get(ca_bundle_b64)
        if path and Path(path).exists():
            return path
        try:
            pem = base64.b64decode(ca_bundle_b64, validate=False)
        except ValueError as exc:
            raise AcmeProblemError("caBundle", f"spec.acme.caBundle is not base64: {exc}") from None
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise AcmeProblemError("caBundle", "spec.acme.caBundle holds no PEM certificate")
        if _bundle_dir is None or not Path(_bundle_dir).is_dir():
            _bundle_dir = tempfile.mkdtemp(prefix="issuance-cabundle-")
            atexit.register(shutil.rmtree, _bundle_dir, True)
        target = Path(_bundle_dir) / f"{hashlib.sha256(pem).hexdigest()[:16]}.pem"
        target.write_bytes(pem)
        _bundle_paths[ca_bundle_b64] = str(target)
        return str(target)


def _retry_after(response: requests.Response) -> timedelta | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return timedelta(seconds=max(0, int(value.strip())))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when - timezone.now() if when.tzinfo else None


def _problem(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and ("type" in body or "detail" in body):
        return body
    text = (response.text or "").strip()[:500]
    return {"type": "", "detail": text or f"HTTP {response.status_code}"}


def _json(response: requests.Response, url: str) -> dict[str, Any]:
    try:
        body = json.loads(response.content)
    except ValueError:
        raise AcmeTemporaryError(
            f"{url}: response is not JSON (HTTP {response.status_code})"
        ) from None
    if not isinstance(body, dict):
        raise AcmeTemporaryError(f"{url}: response is not a JSON object")
    body["url"] = response.headers.get("Location") or url
    return body


def _network_failure(exc: requests.RequestException) -> tuple[str, str] | None:
    """(metric result, description) when the CA gave no answer at all; None for anything
    else requests raises (a malformed URL, a certificate that fails verification: the
    CA's configuration, which waiting will not fix)."""
    text = str(exc)
    if isinstance(exc, requests.ConnectTimeout):
        seconds = re.search(r"connect timeout=([\d.]+)", text)
        return "timeout", f"connect timed out after {seconds[1] if seconds else '?'}s"
    if isinstance(exc, requests.Timeout):
        seconds = re.search(r"read timeout=([\d.]+)", text)
        # A TLS handshake that times out is reported the same way, with the connect timeout.
        return "timeout", f"no answer within {seconds[1] if seconds else '?'}s"
    if isinstance(exc, requests.exceptions.SSLError) and "CERTIFICATE_VERIFY_FAILED" in text:
        return None
    if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
        return "network_error", _os_error(exc) or f"{type(exc).__name__}: {text}"
    return None


def _os_error(exc: BaseException) -> str:
    """ "connection refused" from the OSError somewhere inside requests' wrapped errors."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    fallback = ""
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            if current.strerror:
                return str(current.strerror).lower()
            if current.args and isinstance(current.args[0], str) and not fallback:
                fallback = current.args[0].lower()
        nested = [a for a in current.args if isinstance(a, BaseException)]
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            nested.append(reason)
        nested += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo.extend(nested)
    return fallback


def exchange(
    directory_url: str, send: Callable[[], requests.Response], url: str, *, action: str
) -> requests.Response:
    """Run one request to a CA: pause and reachability checks, badNonce retries, mapping
    failures to TemporaryError / AcmeUnreachableError / AcmeProblemError."""
    bad_nonces = 0
    while True:
        ratelimit.check_not_paused(directory_url)
        probe = health.gate(directory_url)
        try:
            response = send()
        except requests.RequestException as exc:
            failure = _network_failure(exc)
            if failure is None:
                _count(directory_url, action, "error")
                raise AcmeTemporaryError(f"{url}: {type(exc).__name__}: {exc}") from None
            result, error = failure
            _count(directory_url, action, result)
            log.warning("ACME %s %s: no answer: %s", action, url, error)
            raise health.record_failure(directory_url, error, probe=probe) from None
        health.record_answer(directory_url, probe=probe)
        if response.status_code < 400:
            _count(directory_url, action, "ok")
            return response
        problem = _problem(response)
        ptype = problem_type(problem.get("type"))
        detail = str(problem.get("detail") or "")
        if ptype == BAD_NONCE:
            _count(directory_url, action, "bad_nonce")
            if bad_nonces < BAD_NONCE_RETRIES:
                bad_nonces += 1
                log.debug("badNonce from %s; retrying with a fresh nonce", url)
                continue
            # Never a reason to fail an order: the worker tries again after a backoff.
            raise AcmeTemporaryError(f"{url}: {bad_nonces + 1} badNonce answers in a row")
        retry_after = _retry_after(response)
        if response.status_code == 429 or ptype == RATE_LIMITED or retry_after is not None:
            _count(directory_url, action, "rate_limited")
            reason = f"{ptype or 'HTTP ' + str(response.status_code)}: {detail}".strip()
            until = ratelimit.record_pause(directory_url, retry_after, reason)
            log.warning("ACME server %s paused until %s: %s", directory_url, until, reason)
            raise TemporaryError(
                f"ACME server paused until {until.isoformat()}: {reason}",
                delay=max(until - timezone.now(), timedelta(seconds=1)),
            )
        if response.status_code >= 500:
            _count(directory_url, action, "server_error")
            raise AcmeTemporaryError(
                f"{url}: HTTP {response.status_code}: {ptype or ''} {detail}".strip()
            )
        _count(directory_url, action, "problem")
        raise AcmeProblemError(
            ptype,
            detail,
            response.status_code,
            list(problem.get("subproblems") or []),
        )


def probe(directory_url: str, tls: TLSOptions | None = None) -> None:
    """GET the directory over a new connection (kept connections to a CA that froze may be
    dead), through the same checks as every request: sent only when the CA is reachable
    or this is its turn to probe (else AcmeUnreachableError, nothing sent)."""
    verify = (tls or TLSOptions()).verify()

    def send() -> requests.Response:
        with requests.Session() as session:
            return session.get(
                directory_url,
                timeout=(CONNECT_TIMEOUT, PROBE_READ_TIMEOUT),
                verify=verify,
                headers={"User-Agent": USER_AGENT, "Connection": "close"},
            )

    _json(exchange(directory_url, send, directory_url, action="probe"), directory_url)


class AcmeClient:
    """One ACME account at one CA. Thread-safe; reuse it (it keeps connections alive)."""

    def __init__(
        self,
        directory_url: str,
        key: JWK,
        account_uri: str = "",
        tls: TLSOptions | None = None,
    ) -> None:
        self.directory_url = directory_url
        self.key = key
        self.account_uri = account_uri
        self.tls = tls or TLSOptions()
        pool = max(10, int(getattr(settings, "WORKER_THREADS", 8)) * 2)
        self._signer = Signer(key)
        self._net = Network(
            self._signer, self.tls.verify(), pool, USER_AGENT, (CONNECT_TIMEOUT, READ_TIMEOUT)
        )
        self._directory: dict[str, Any] | None = None
        self._dir_lock = threading.Lock()
        self._thumbprint = self._signer.thumbprint
        if self.tls.skip_verify:
            warnings.filterwarnings("ignore", message="Unverified HTTPS request")

    # -- transport -------------------------------------------------------------
    def _send(
        self, send: Callable[[], requests.Response], url: str, *, action: str
    ) -> requests.Response:
        return exchange(self.directory_url, send, url, action=action)

    def directory(self) -> dict[str, Any]:
        with self._dir_lock:
            if self._directory is None:
                response = self._send(
                    lambda: self._net.get(self.directory_url),
                    self.directory_url,
                    action="directory",
                )
                self._directory = _json(response, self.directory_url)
            return self._directory

    def _endpoint(self, name: str) -> str:
        url = self.directory().get(name)
        if not url:
            raise AcmeProblemError("unsupported", f"the ACME directory has no {name!r} endpoint")
        return str(url)

    def post(
        self,
        url: str,
        payload: dict[str, Any] | None,
        *,
        action: str,
        accept: str | None = None,
        with_jwk: bool = False,
    ) -> requests.Response:
        """A signed POST (payload None = POST-as-GET); `action` labels the metrics.
        Signed with the account URL as kid, or with the bare JWK when `with_jwk`
        (newAccount, RFC 8555 §6.2)."""
        new_nonce = self._endpoint("newNonce")
        kid = None if with_jwk else self.account_uri
        return self._send(
            lambda: self._net.signed_post(url, payload, new_nonce, kid, accept),
            url,
            action=action,
        )

    def post_json(self, url: str, payload: dict[str, Any] | None, action: str) -> dict[str, Any]:
        return _json(self.post(url, payload, action=action), url)

    # -- account ----------------------------------------------------------------
    def new_account(
        self,
        email: str = "",
        eab: tuple[str, str, str] | None = None,
        only_return_existing: bool = False,
    ) -> dict[str, Any]:
        """newAccount; returns the account object with "url" (the account URI)."""
        url = self._endpoint("newAccount")
        payload: dict[str, Any] = {"termsOfServiceAgreed": True}
        if email:
            payload["contact"] = [f"mailto:{email}"]
        if only_return_existing:
            payload = {"onlyReturnExisting": True}
        elif eab:
            key_id, hmac_key, hmac_alg = eab
            payload["externalAccountBinding"] = messages.ExternalAccountBinding.from_data(
                account_public_key=self.key.public_key(),
                kid=key_id,
                hmac_key=hmac_key,
                hmac_alg=hmac_alg,
                directory=messages.Directory.from_json(
                    {k: v for k, v in self.directory().items() if k != "url"}
                ),
            )
        response = self.post(url, payload, action="new_account", with_jwk=True)
        account = _json(response, url)
        uri = response.headers.get("Location", "")
        if not uri:
            raise AcmeTemporaryError("newAccount answer has no Location header")
        account["url"] = uri
        self.account_uri = uri
        return account

    @property
    def external_account_required(self) -> bool:
        meta = self.directory().get("meta") or {}
        return bool(meta.get("externalAccountRequired"))

    def account_orders_url(self) -> str:
        """The account's orders list (RFC 8555 §7.1.2.1), or "" if the CA has none."""
        if not self.account_uri:
            return ""
        account = self.post_json(self.account_uri, None, "get_account")
        return str(account.get("orders") or "")

    def list_orders(self, max_pages: int = 20) -> list[str]:
        """Order URLs from the account's orders list (Pebble has it; Let's Encrypt does not)."""
        url = self.account_orders_url()
        found: list[str] = []
        for _ in range(max_pages):
            if not url:
                break
            response = self.post(url, None, action="list_orders")
            found += [str(u) for u in (_json(response, url).get("orders") or [])]
            nexts = [
                link["url"]
                for link in parse_header_links(response.headers.get("Link", ""))
                if link.get("rel") == "next" and link.get("url")
            ]
            url = nexts[0] if nexts else ""
        return found

    # -- orders -------------------------------------------------------------------
    def new_order(
        self, identifiers: list[tuple[str, str]], profile: str | None = None
    ) -> dict[str, Any]:
        """Create an order for [(type, value)]. Like every request, not repeated after a
        timeout (a repeat could create a second order); the orders controller recovers."""
        url = self._endpoint("newOrder")
        payload: dict[str, Any] = {"identifiers": [{"type": t, "value": v} for t, v in identifiers]}
        if profile:
            payload["profile"] = profile
        return _json(self.post(url, payload, action="new_order"), url)

    def get_order(self, url: str) -> dict[str, Any]:
        order = self.post_json(url, None, "get_order")
        order["url"] = url
        return order

    def get_authorization(self, url: str) -> dict[str, Any]:
        authz = self.post_json(url, None, "get_authorization")
        authz["url"] = url
        authz.setdefault("wildcard", False)
        return authz

    def get_challenge(self, url: str) -> dict[str, Any]:
        chal = self.post_json(url, None, "get_challenge")
        chal["url"] = url
        return chal

    def answer_challenge(self, url: str) -> dict[str, Any]:
        chal = self.post_json(url, {}, "answer_challenge")
        chal["url"] = url
        return chal

    def finalize(self, finalize_url: str, csr_pem: str) -> dict[str, Any]:
        der = x509.load_pem_x509_csr(csr_pem.encode()).public_bytes(serialization.Encoding.DER)
        order = self.post_json(finalize_url, {"csr": b64(der)}, "finalize")
        return order

    def key_authorization(self, token: str) -> str:
        return f"{token}.{self._thumbprint}"

    def dns01_txt_value(self, token: str) -> str:
        return b64(hashlib.sha256(self.key_authorization(token).encode()).digest())

    # -- certificates -----------------------------------------------------------------
    def _fetch_chain(self, url: str) -> tuple[str, list[str]]:
        response = self.post(url, None, action="download_certificate", accept=PEM_CHAIN)
        alternates = [
            link["url"]
            for link in parse_header_links(response.headers.get("Link", ""))
            if link.get("rel") == "alternate" and link.get("url")
        ]
        return response.text, alternates

    def download_certificate(self, url: str, preferred_chain: str | None = None) -> str:
        """PEM chain, leaf first. With `preferred_chain`, the (alternate) chain whose top
        certificate is issued by that CN, as cert-manager's preferredChain; else the default."""
        pem, alternates = self._fetch_chain(url)
        if not preferred_chain or chain_matches(pem, preferred_chain):
            return pem
        for alt_url in alternates:
            alt_pem, _ = self._fetch_chain(alt_url)
            if chain_matches(alt_pem, preferred_chain):
                return alt_pem
        return pem

    def renewal_info(self, cert_pem: str) -> tuple[datetime, datetime] | None:
        """ARI (RFC 9773) suggested window, or None when the CA does not offer it."""
        base = self.directory().get("renewalInfo")
        if not base:
            return None
        url = f"{str(base).rstrip('/')}/{ari_cert_id(cert_pem)}"
        response = self._send(lambda: self._net.get(url), url, action="renewal_info")
        return parse_renewal_info(_json(response, url))


# -- one client per issuer account -----------------------------------------------------

_clients_lock = threading.Lock()
_clients: dict[tuple[int, int, str, str], AcmeClient] = {}


def tls_options(acme_spec: dict[str, Any]) -> TLSOptions:
    return TLSOptions(
        ca_bundle_b64=str(acme_spec.get("caBundle") or ""),
        skip_verify=bool(acme_spec.get("skipTLSVerify")),
    )


def client_for(issuer: Any) -> AcmeClient:
    """The client for an ACME issuer's registered account (cached per issuer generation)."""
    from issuance.acme.account import load_account_key

    if not issuer.acme_account_uri or not issuer.acme_account_key_ciphertext:
        raise TemporaryError(
            f"Issuer {issuer.name} has no registered ACME account yet", delay=timedelta(seconds=5)
        )
    spec = issuer.kind_spec
    cache_key = (issuer.pk, issuer.generation, issuer.acme_account_uri, str(spec.get("server")))
    with _clients_lock:
        client = _clients.get(cache_key)
    if client is not None:
        return client
    client = AcmeClient(
        str(spec.get("server") or ""),
        load_account_key(issuer),
        issuer.acme_account_uri,
        tls_options(spec),
    )
    with _clients_lock:
        # Drop clients for older generations of the same issuer.
        for key in [k for k in _clients if k[0] == issuer.pk]:
            del _clients[key]
        _clients[cache_key] = client
    return client


def forget_clients() -> None:
    with _clients_lock:
        _clients.clear()
