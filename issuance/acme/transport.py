"""The ACME client's POSTs and nonce HEADs over urllib3 directly, answered as requests.Response.

`requests` is the `acme` library's transport; per request it merges settings, prepares the
request, runs hooks and cookie jars, and the library then formats a debug log of every
response even when debug logging is off. During bulk issuance that was about half of the
ACME client's CPU, for ~9 requests per certificate. This transport keeps the same
connection pooling (urllib3 under both), TLS verification (the caBundle file, certifi's
bundle, or none for skipTLSVerify), timeouts and no retries, and raises requests'
exceptions, so the error handling above it is unchanged. Used only when no proxy is
configured (requests handles proxies); GETs (directory, ARI) stay on requests, which
follows redirects.
"""

from __future__ import annotations

from typing import Any

import requests
import urllib3
from requests.structures import CaseInsensitiveDict
from requests.utils import DEFAULT_CA_BUNDLE_PATH


class DirectTransport:
    def __init__(self, verify: bool | str, pool: int) -> None:
        if verify is False:
            tls: dict[str, Any] = {"cert_reqs": "CERT_NONE"}
        else:
            ca = DEFAULT_CA_BUNDLE_PATH if verify is True else verify
            tls = {"cert_reqs": "CERT_REQUIRED", "ca_certs": ca}
        self.pool = urllib3.PoolManager(num_pools=4, maxsize=pool, **tls)

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        timeout: tuple[float, float],
        data: str | bytes | None = None,
    ) -> requests.Response:
        try:
            raw = self.pool.request(
                method,
                url,
                body=data,
                headers={"Accept": "*/*", **headers},
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                retries=False,
                redirect=False,
            )
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
