"""Inline credentials in cert-manager dns01 blocks (our extension, used by the console's
password fields): moved into the encrypted Secret `<issuer>-dns-<index>`, the spec keeping
a reference the solver reads like any other `…SecretRef`."""

from __future__ import annotations

from typing import Any

import pytest

from issuance.acme.solvers.dnsproviders import SecretRef, plan_for
from issuance.specs import SpecError, validate_issuer_spec
from issuance.specs.dns_providers import INLINE_SECRETS


def _spec(dns01: dict[str, Any]) -> dict[str, Any]:
    return {
        "acme": {"server": "https://ca.example/dir", "solvers": [{"http01": {}}, {"dns01": dns01}]}
    }


@pytest.mark.parametrize(
    ("provider", "block"),
    [
        ("cloudflare", {"apiToken": "s3cr3t-value"}),
        ("route53", {"accessKeyID": "AKIA1", "secretAccessKey": "s3cr3t-value"}),
        ("digitalocean", {"token": "s3cr3t-value"}),
        (
            "azureDNS",
            {
                "clientID": "c",
                "clientSecret": "s3cr3t-value",
                "subscriptionID": "s",
                "tenantID": "t",
                "resourceGroupName": "rg",
            },
        ),
        ("cloudDNS", {"project": "p", "serviceAccount": "s3cr3t-value"}),
    ],
)
def test_inline_credential_becomes_a_secret_reference(provider: str, block: dict[str, Any]) -> None:
    plan = validate_issuer_spec("iss", _spec({provider: block}), lookups=False)
    field = next(k for k in INLINE_SECRETS[provider] if k in block)
    ref = INLINE_SECRETS[provider][field]
    stored: dict[str, Any] = dict(plan.spec["acme"]["solvers"][1]["dns01"])
    assert stored[provider][ref] == {"name": "iss-dns-1", "key": field}
    assert "s3cr3t-value" not in repr(plan.spec)
    (write,) = plan.secrets
    assert (write.name, write.data) == ("iss-dns-1", {field: "s3cr3t-value"})
    lexicon = plan_for(stored)
    assert lexicon is not None
    assert SecretRef("iss-dns-1", field) in lexicon.secrets.values() or (
        lexicon.credentials == SecretRef("iss-dns-1", field)
    )


def test_inline_and_reference_together_are_refused_naming_the_block() -> None:
    block = {"apiToken": "s3cr3t-value", "apiTokenSecretRef": {"name": "x", "key": "y"}}
    with pytest.raises(SpecError) as err:
        validate_issuer_spec("iss", _spec({"cloudflare": block}), lookups=False)
    assert (
        "spec.acme.solvers[1].dns01.cloudflare",
        "set only one of apiTokenSecretRef or apiToken",
    ) in err.value.errors


def test_an_inline_credential_must_be_a_string() -> None:
    with pytest.raises(SpecError) as err:
        validate_issuer_spec("iss", _spec({"digitalocean": {"token": 5}}), lookups=False)
    paths = [p for p, _ in err.value.errors]
    assert "spec.acme.solvers[1].dns01.digitalocean.token" in paths
