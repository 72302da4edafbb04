"""How the ACME client's requests reach the CA: nonces, signed POSTs, the HTTP underneath.

`requests` (the `acme` library's transport) merges settings, prepares the request, runs
hooks and cookie jars per request; the library then formats a debug log of every response
even when debug logging is off, and urllib3's PoolManager parses the URL and looks its
pool up again each time. During bulk issuance (~8 requests per certificate) that was most
of the ACME client's CPU. So when no proxy is configured, POSTs and nonce HEADs go over one
urllib3 connection pool per CA origin, kept, with the headers built once
(`DirectTransport`): the same keep-alive pooling, TLS verification (the caBundle file,
certifi's bundle, or none for skipTLSVerify), timeouts and no retries, raising requests'
exceptions and answering with a requests.Response, so the error handling above is
unchanged. With a proxy everything goes through `requests`, which handles proxies; GETs
(directory, ARI) always do, since requests also follows redirects.

Measured (docs/decisions/0004-bypasses.md): `requests.Session` in place of the urllib3 pools
costs the worker 2.6 ms more per certificate, 10 % of its CPU. It becomes unnecessary if
requests' per-call overhead shrinks.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from requests.utils import DEFAULT_CA_BUNDLE_PATH

from issuance.acme.protocol.errors import AcmeTemporaryError
from issuance.acme.protocol.jws import Signer

JOSE = "application/jose+json"
REPLAY_NONCE = "Replay-Nonce"
# RFC 8555 §6.5.1: a nonce is base64url; anything else is not worth sending back.
_NONCE = re.compile(r"[A-Za-z0-9_-]+")
# Distinct CA origins a client keeps pools for (one CA, sometimes a separate host for
# certificate downloads).
MAX_ORIGINS = 8


def _split(url: str) -> tuple[str, str]:
    """("https://host:port", "/path?query") without urllib3's full URL parser."""
    start = url.find("://")
    slash = url.find("/", start + 3 if start >= 0 else 0)
    if slash < 0:
        return url, "/"
    return url[:slash], url[slash:]


class DirectTransport:
    """POST / HEAD over urllib3 pools kept per origin, answered as requests would."""

    def __init__(self, verify: bool | str, pool: int) -> None:
        if verify is False:
            self._tls: dict[str, Any] = {"cert_reqs": "CERT_NONE"}
        else:
            ca = DEFAULT_CA_BUNDLE_PATH if verify is True else verify
            self._tls = {"cert_reqs": "CERT_REQUIRED", "ca_certs": ca}
        self._maxsize = pool
        self._pools: dict[str, urllib3.HTTPConnectionPool] = {}
        self._lock = threading.Lock()
        self._timeouts: dict[tuple[float, float], urllib3.Timeout] = {}

    def _pool(self, origin: str) -> urllib3.HTTPConnectionPool:
        pool = self._pools.get(origin)
        if pool is not None:
            return pool
        with self._lock:
            pool = self._pools.get(origin)
            if pool is None:
                tls = self._tls if origin.startswith("https:") else {}
                pool = urllib3.connection_from_url(origin, maxsize=self._maxsize, **tls)
                if len(self._pools) >= MAX_ORIGINS:
                    oldest = next(iter(self._pools))
                    self._pools.pop(oldest).close()
                self._pools[origin] = pool
            return pool

    def _timeout(self, timeout: tuple[float, float]) -> urllib3.Timeout:
        value = self._timeouts.get(timeout)
        if value is None:
            value = self._timeouts[timeout] = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        return value

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        timeout: tuple[float, float],
        data: str | bytes | None = None,
    ) -> requests.Response:
        origin, path = _split(url)
        try:
            raw = self._pool(origin).urlopen(
                method,
                path,
                body=data,
                headers=headers if "Accept" in headers else {"Accept": "*/*", **headers},
                timeout=self._timeout(timeout),
                retries=False,
                redirect=False,
                assert_same_host=False,
            )
        except urllib3.exceptions.NewConnectionError as exc:
            # A subclass of ConnectTimeoutError, but refused / unreachable, as requests says.
            raise requests.ConnectionError(exc) from exc
        except urllib3.exceptions.ConnectTimeoutError as exc:
            raise requests.ConnectTimeout(exc) from exc
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise requests.ReadTimeout(exc) from exc
        except urllib3.exceptions.SSLError as exc:
            raise requests.exceptions.SSLError(exc) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise requests.ConnectionError(exc) from exc
        response = requests.Response()
        response.status_code = raw.status
        response.headers = CaseInsensitiveDict(raw.headers)
        response._content = raw.data
        response.url = url
        response.reason = raw.reason or ""
        return response


class Network:
    """One account's connections and nonce pool, shared by the worker's threads."""

    def __init__(
        self,
        signer: Signer,
        verify: bool | str,
        pool: int,
        user_agent: str,
        timeout: tuple[float, float],
    ) -> None:
        self.signer = signer
        self.verify = verify
        self.timeout = timeout
        self.user_agent = user_agent
        # set.add / set.pop are atomic: threads share the pool without a lock.
        self._nonces: set[str] = set()
        self.session = requests.Session()
        if not urllib.request.getproxies():
            # No proxy configured: skip requests' per-request scan of the environment
            # (proxies, netrc).
            self.session.trust_env = False
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)
        self.direct = None if self.session.trust_env else DirectTransport(verify, pool)
        self._post_headers = {"Accept": "*/*", "Content-Type": JOSE, "User-Agent": user_agent}
        self._head_headers = {"Accept": "*/*", "User-Agent": user_agent}

    def send(
        self, method: str, url: str, headers: dict[str, str], data: bytes | None = None
    ) -> requests.Response:
        if self.direct is not None and method in ("POST", "HEAD"):
            return self.direct.request(
                method, url, headers=headers, timeout=self.timeout, data=data
            )
        return self.session.request(
            method, url, headers=headers, data=data, timeout=self.timeout, verify=self.verify
        )

    def get(self, url: str) -> requests.Response:
        response = self.send("GET", url, {"User-Agent": self.user_agent})
        response.encoding = "utf-8"  # JSON documents (the directory, ARI)
        return response

    def take_nonce(self, new_nonce_url: str) -> str:
        try:
            return self._nonces.pop()
        except KeyError:
            pass
        response = self.send("HEAD", new_nonce_url, self._head_headers)
        nonce = response.headers.get(REPLAY_NONCE, "")
        if not _NONCE.fullmatch(nonce):
            raise AcmeTemporaryError(
                f"no Replay-Nonce from {new_nonce_url} (HTTP {response.status_code})"
            )
        return nonce

    def keep_nonce(self, response: requests.Response) -> None:
        nonce = response.headers.get(REPLAY_NONCE)
        if nonce and _NONCE.fullmatch(nonce):
            self._nonces.add(nonce)

    def signed_post(
        self,
        url: str,
        payload: dict[str, Any] | None,
        new_nonce_url: str,
        kid: str | None,
        accept: str | None = None,
        signer: Signer | None = None,
    ) -> requests.Response:
        """One JWS POST with a nonce from the pool (or a HEAD); keeps the answer's nonce.
        `kid` None signs with the bare JWK (newAccount); `signer` another key than the
        account's (revokeCert signed with the certificate's own key, RFC 8555 §7.6)."""
        data = (signer or self.signer).sign(url, self.take_nonce(new_nonce_url), payload, kid)
        headers = self._post_headers
        if accept:
            headers = {**headers, "Accept": accept}
        response = self.send("POST", url, headers, data)
        self.keep_nonce(response)
        # JSON, problem documents and PEM are UTF-8 (PEM: ASCII); unset, requests would
        # run its charset detection over the body.
        response.encoding = "utf-8"
        return response
