"""What a CA's directory says about itself (RFC 8555 §7.1.1 `meta`): its terms of service,
whether it needs External Account Binding, and the profiles it offers (the ACME profiles
draft: `meta.profiles`, name → description). Read for people filling in an issuer form, so
it never touches the per-CA outage record: a typo in a form is not a CA outage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import requests

from issuance.acme.protocol.client import USER_AGENT, TLSOptions
from issuance.acme.protocol.errors import AcmeProblemError

# Someone waits for the answer in a browser: shorter than the worker's 10 s / 30 s.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 8.0
# A directory is a few hundred bytes; anything far larger is not one.
MAX_BYTES = 256 * 1024


class DirectoryError(Exception):
    """The directory could not be read; the message says why, for a person."""


@dataclass(frozen=True)
class DirectoryMeta:
    url: str
    profiles: dict[str, str] = field(default_factory=dict)
    terms_of_service: str = ""
    website: str = ""
    external_account_required: bool = False


def _web_url(value: object) -> str:
    """Only http(s) links are kept: the value is put into a page as a link."""
    if not isinstance(value, str) or len(value) > 2048:
        return ""
    return value if urlsplit(value).scheme in ("https", "http") else ""


def fetch_directory_meta(url: str, tls: TLSOptions | None = None) -> DirectoryMeta:
    """GET the directory (no redirects, bounded size and time) and read its `meta`."""
    if urlsplit(url).scheme != "https" or not urlsplit(url).hostname:
        raise DirectoryError("the directory URL must be an https URL")
    try:
        verify = (tls or TLSOptions()).verify()
    except AcmeProblemError as exc:
        raise DirectoryError(exc.detail) from None
    try:
        with requests.get(
            url,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            verify=verify,
            allow_redirects=False,
            stream=True,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
        ) as response:
            body = response.raw.read(MAX_BYTES + 1, decode_content=True)
            status = response.status_code
    except requests.RequestException as exc:
        raise DirectoryError(f"could not read {url}: {type(exc).__name__}: {exc}") from None
    if status != 200:
        raise DirectoryError(f"{url} answered HTTP {status}, not an ACME directory")
    if len(body) > MAX_BYTES:
        raise DirectoryError(f"{url} answered more than {MAX_BYTES} bytes: not an ACME directory")
    try:
        directory = json.loads(body)
    except ValueError:
        raise DirectoryError(f"{url} did not answer JSON: not an ACME directory") from None
    if not isinstance(directory, dict) or "newNonce" not in directory:
        raise DirectoryError(f"{url} is not an ACME directory (no newNonce)")
    meta = directory.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    raw_profiles = meta.get("profiles")
    profiles = (
        {str(k)[:256]: str(v)[:1024] for k, v in raw_profiles.items()}
        if isinstance(raw_profiles, dict)
        else {}
    )
    return DirectoryMeta(
        url=url,
        profiles=profiles,
        terms_of_service=_web_url(meta.get("termsOfService")),
        website=_web_url(meta.get("website")),
        external_account_required=meta.get("externalAccountRequired") is True,
    )
