"""Secrets referenced by issuer specs (CA key pairs, EAB HMAC keys, TSIG secrets).

cert-manager keeps these in Kubernetes Secrets and the spec only names them
(`ca.secretName`, `keySecretRef {name, key}`, `tsigSecretSecretRef {name, key}`). We do
the same with `issuance.models.Secret` rows: inline values in a spec (our extensions:
`ca.certificate`/`ca.privateKey`, `externalAccountBinding.hmacKey`, `rfc2136.tsigSecret`)
are moved into a Secret (encrypted) and the stored spec keeps only the reference, so
API output never carries them.

Layout: `kubernetes.io/tls` Secrets use tls_crt / ca_crt / the encrypted key; `Opaque`
Secrets keep their data map as JSON in the encrypted column.

Controllers read values with `read_secret_value(ref["name"], ref.get("key"))`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from issuance.models import Secret
from issuance.specs.errors import SpecError

TLS = "kubernetes.io/tls"
OPAQUE = "Opaque"
TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")


class SecretRefError(LookupError):
    """A referenced Secret or key does not exist."""


@dataclass(frozen=True)
class SecretWrite:
    """A Secret an issuer spec wants stored; `path` is the spec field it came from."""

    name: str
    path: str
    type: str = TLS
    tls_crt: str = ""
    ca_crt: str = ""
    tls_key: str = ""
    data: dict[str, str] = field(default_factory=dict)

    def private_text(self) -> str:
        return json.dumps(self.data, sort_keys=True) if self.type == OPAQUE else self.tls_key


def owner_conflict(name: str) -> str | None:
    """A problem if `name` is the output Secret of a Certificate (never overwrite those)."""
    owner = (
        Secret.objects.filter(name=name, certificate__isnull=False)
        .values_list("certificate__name", flat=True)
        .first()
    )
    return f"secret {name!r} holds the key pair of Certificate {owner!r}" if owner else None


def store(write: SecretWrite) -> bool:
    """Create or update the Secret; returns whether anything changed. Call inside a transaction."""
    problem = owner_conflict(write.name)
    if problem:
        raise SpecError([(write.path, problem)])
    secret = Secret.objects.select_for_update().filter(name=write.name).first()
    private = write.private_text()
    if (
        secret is not None
        and secret.type == write.type
        and secret.tls_crt == write.tls_crt
        and secret.ca_crt == write.ca_crt
        and secret.tls_key == private
    ):
        return False
    secret = secret or Secret(name=write.name)
    secret.type = write.type
    secret.tls_crt = write.tls_crt
    secret.ca_crt = write.ca_crt
    secret.tls_key = private
    secret.save()
    return True


def secret_exists(name: str) -> bool:
    return Secret.objects.filter(name=name).exists()


def read_secret_value(name: str, key: str | None = None) -> str:
    """One value of a stored Secret, decrypted. Opaque: by key (or its only key); tls: by
    "tls.crt" / "tls.key" / "ca.crt"."""
    secret = Secret.objects.filter(name=name).first()
    if secret is None:
        raise SecretRefError(f"secret {name!r} not found")
    if secret.type == OPAQUE:
        data = json.loads(secret.tls_key or "{}")
        if key is None and len(data) == 1:
            return str(next(iter(data.values())))
        if key not in data:
            raise SecretRefError(f"secret {name!r} has no key {key!r}")
        return str(data[key])
    values = {"tls.crt": secret.tls_crt, "tls.key": secret.tls_key, "ca.crt": secret.ca_crt}
    if key not in values:
        raise SecretRefError(f"secret {name!r} has no key {key!r} (one of {', '.join(TLS_KEYS)})")
    return values[key]
