"""The JWS of an ACME request (RFC 8555 §6.2), signed without josepy's generic machinery.

josepy's JWS.sign builds Header and Signature objects and runs them through json_util's
field (de)serialization, then the `acme` library serialises the result again with
indentation: about a third of a millisecond of CPU per request, four times the signature
itself. An ACME request's protected header is four known fields and its payload a small
dict, so they are written with `json.dumps` here; the key types and the signature
algorithms (ES256, RS256) stay josepy's, and the public JWK and its thumbprint are
computed once per account key.

Measured (docs/decisions/0004-bypasses.md): signing with josepy's JWS costs the worker 3.9
ms more per certificate, 15 % of its CPU. It becomes unnecessary if josepy's JWS
serialisation gets cheaper.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from josepy.interfaces import JSONDeSerializable
from josepy.jwa import ES256, ES384, ES512, RS256, JWASignature
from josepy.jwk import JWK, JWKEC

_COMPACT = (",", ":")


def b64(data: bytes) -> str:
    """base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _jose_default(obj: object) -> Any:
    # Payload parts built by the acme/josepy libraries (the EAB's inner JWS).
    if isinstance(obj, JSONDeSerializable):
        return obj.to_partial_json()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def encode_payload(payload: dict[str, Any] | None) -> str:
    """base64url of the JSON payload; "" for POST-as-GET (RFC 8555 §6.3)."""
    if payload is None:
        return ""
    return b64(json.dumps(payload, separators=_COMPACT, default=_jose_default).encode())


def _ec_alg(key: JWKEC) -> JWASignature:
    """ES256 for P-256 account keys; a certificate's own key (revokeCert) may be P-384/521."""
    size = getattr(getattr(key.key, "curve", None), "key_size", 256)
    return {384: ES384, 521: ES512}.get(size, ES256)


class Signer:
    """Signs requests with one account key (ES256 for EC keys, RS256 for RSA)."""

    def __init__(self, key: JWK) -> None:
        self.key = key
        self.alg: JWASignature = _ec_alg(key) if isinstance(key, JWKEC) else RS256
        # The cryptography key itself: josepy wraps it in ComparableKey, whose attribute
        # forwarding is one more Python call per signature.
        self._private = getattr(key.key, "_wrapped", key.key)
        self.public_jwk: dict[str, Any] = key.public_key().to_json()
        self.thumbprint = b64(key.thumbprint())

    def sign(self, url: str, nonce: str, payload: dict[str, Any] | None, kid: str | None) -> bytes:
        """The flattened JSON serialisation POSTed to `url`: the protected header has
        exactly alg, nonce, url and either kid (the account URL) or jwk (newAccount,
        RFC 8555 §6.2)."""
        header: dict[str, Any] = {"alg": self.alg.name, "nonce": nonce, "url": url}
        if kid:
            header["kid"] = kid
        else:
            header["jwk"] = self.public_jwk
        protected = b64(json.dumps(header, separators=_COMPACT).encode())
        encoded = encode_payload(payload)
        signature = self.alg.sign(self._private, f"{protected}.{encoded}".encode("ascii"))
        body = {"protected": protected, "payload": encoded, "signature": b64(signature)}
        return json.dumps(body, separators=_COMPACT).encode()
