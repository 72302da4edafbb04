"""ACME (RFC 8555) client for the controllers: one call = one request, plain dicts back.

Requests are signed with josepy keys and algorithms (jws.py) and sent by transport.py
(nonce pool; urllib3 pools or requests); the `acme` library builds the EAB. Every request
goes through exchange.py: pauses and reachability of the CA (told to and read from the
caller's CaRecord), badNonce retries, failures mapped to TemporaryError / AcmeProblemError.
Every request has a timeout (connect 10 s, read 30 s) and is not repeated when it times
out (a repeated newOrder could create a second order; see controllers/orders.py for
recovery). One client (and its keep-alive connections) per issuer account, shared by the
worker's threads.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import logging
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from acme import messages
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from josepy.jwk import JWK
from requests.utils import parse_header_links

from issuance.acme.protocol.certs import (
    RenewalInfo,
    ari_cert_id,
    chain_matches,
    parse_renewal_info,
    parse_retry_after,
)
from issuance.acme.protocol.errors import ALREADY_REVOKED, AcmeProblemError, AcmeTemporaryError
from issuance.acme.protocol.exchange import NO_RECORD, CaRecord, exchange
from issuance.acme.protocol.jws import Signer, b64
from issuance.acme.protocol.transport import Network
from issuance.pki.x509 import load_leaf

log = logging.getLogger("issuance.acme.protocol")

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
# A probe is a GET of the directory, which any CA answers at once.
PROBE_READ_TIMEOUT = 10.0
USER_AGENT = "issuance-console"
PEM_CHAIN = "application/pem-certificate-chain"


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


def probe(directory_url: str, tls: TLSOptions | None = None, record: CaRecord = NO_RECORD) -> None:
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

    _json(exchange(record, directory_url, send, directory_url, action="probe"), directory_url)


class AcmeClient:
    """One ACME account at one CA. Thread-safe; reuse it (it keeps connections alive)."""

    def __init__(
        self,
        directory_url: str,
        key: JWK,
        account_uri: str = "",
        tls: TLSOptions | None = None,
        record: CaRecord = NO_RECORD,
    ) -> None:
        self.directory_url = directory_url
        self.record = record
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
        return exchange(self.record, self.directory_url, send, url, action=action)

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
        signer: Signer | None = None,
    ) -> requests.Response:
        """A signed POST (payload None = POST-as-GET); `action` labels the metrics.
        Signed with the account URL as kid, or with the bare JWK when `with_jwk`
        (newAccount, RFC 8555 §6.2); with `signer`, by that key's JWK."""
        new_nonce = self._endpoint("newNonce")
        kid = None if with_jwk or signer is not None else self.account_uri
        return self._send(
            lambda: self._net.signed_post(url, payload, new_nonce, kid, accept, signer),
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
        self,
        identifiers: list[tuple[str, str]],
        profile: str | None = None,
        replaces: str | None = None,
    ) -> dict[str, Any]:
        """Create an order for [(type, value)]. Like every request, not repeated after a
        timeout (a repeat could create a second order); the orders controller recovers.
        `replaces` (RFC 9773 §5, the ARI id of the certificate this one renews) is sent
        only to a CA whose directory offers renewalInfo."""
        url = self._endpoint("newOrder")
        payload: dict[str, Any] = {"identifiers": [{"type": t, "value": v} for t, v in identifiers]}
        if profile:
            payload["profile"] = profile
        if replaces and self.offers_ari:
            payload["replaces"] = replaces
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

    @property
    def offers_ari(self) -> bool:
        return bool(self.directory().get("renewalInfo"))

    def fetch_renewal_info(self, cert_pem: str) -> RenewalInfo | None:
        """ARI (RFC 9773 §4.2): the window and the CA's Retry-After (None: no ARI here).

        A body without a usable window gives a RenewalInfo with no window."""
        base = self.directory().get("renewalInfo")
        if not base:
            return None
        url = f"{str(base).rstrip('/')}/{ari_cert_id(cert_pem)}"
        response = self._send(lambda: self._net.get(url), url, action="renewal_info")
        body = _json(response, url)
        window = parse_renewal_info(body)
        return RenewalInfo(
            window=window,
            retry_after=parse_retry_after(response.headers.get("Retry-After")),
            explanation_url=str(body.get("explanationURL") or ""),
        )

    def renewal_info(self, cert_pem: str) -> tuple[datetime, datetime] | None:
        """ARI (RFC 9773) suggested window, or None when the CA does not offer it."""
        info = self.fetch_renewal_info(cert_pem)
        return info.window if info is not None else None

    def revoke_cert(self, cert_pem: str, reason: int, cert_key_pem: str = "") -> bool:
        """revokeCert (RFC 8555 §7.6) for the leaf of `cert_pem` with an RFC 5280 reason code.

        Signed with the account key (kid), or, given `cert_key_pem`, with the certificate's
        own private key (jwk): the proof a CA wants for keyCompromise. Returns False when
        the CA says it was already revoked (a repeat after a crash: the wanted outcome);
        other refusals raise AcmeProblemError.
        """
        url = self._endpoint("revokeCert")
        der = load_leaf(cert_pem).public_bytes(serialization.Encoding.DER)
        payload = {"certificate": b64(der), "reason": reason}
        signer = Signer(JWK.load(cert_key_pem.encode())) if cert_key_pem else None
        try:
            self.post(url, payload, action="revoke_cert", signer=signer)
        except AcmeProblemError as exc:
            if exc.type == ALREADY_REVOKED:
                return False
            raise
        return True


def tls_options(acme_spec: Mapping[str, object]) -> TLSOptions:
    return TLSOptions(
        ca_bundle_b64=str(acme_spec.get("caBundle") or ""),
        skip_verify=bool(acme_spec.get("skipTLSVerify")),
    )
