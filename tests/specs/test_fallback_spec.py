"""spec.acme.fallback: further ACME servers, validated like the first, EAB keys moved out."""

from __future__ import annotations

from typing import Any

import pytest

from issuance.acme.issuer_spec import MAX_FALLBACKS
from issuance.specs import SpecError, apply_issuer, validate_issuer_spec
from issuance.specs.secret_refs import read_secret_value


def problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_issuer_spec("iss", spec, lookups=False)
    return [field for field, _ in info.value.errors]


def acme(**extra: Any) -> dict[str, Any]:
    return {"acme": {"server": "https://one.test/dir", **extra}}


def test_fallback_servers_are_kept_in_order_with_their_settings() -> None:
    spec = acme(
        fallback=[
            {"server": "https://two.test/dir", "email": "ops@example.com", "profile": "short"},
            {"server": "https://three.test/dir", "skipTLSVerify": True},
        ]
    )
    result = validate_issuer_spec("iss", spec, lookups=False)
    assert result.spec["acme"]["fallback"] == [
        {"server": "https://two.test/dir", "email": "ops@example.com", "profile": "short"},
        {"server": "https://three.test/dir", "skipTLSVerify": True},
    ]
    assert result.secrets == []


@pytest.mark.parametrize(
    ("fallback", "field"),
    [
        ("https://two.test/dir", "spec.acme.fallback"),
        (
            [{"server": "https://two.test/dir"}, {"email": "a@example.com"}],
            "spec.acme.fallback[1].server",
        ),
        ([{"server": "ftp://two.test/dir"}], "spec.acme.fallback[0].server"),
        ([{"server": "https://one.test/dir"}], "spec.acme.fallback[0].server"),
        (
            [{"server": "https://two.test"}, {"server": "https://two.test"}],
            "spec.acme.fallback[1].server",
        ),
        ([{"server": "https://two.test", "email": "nope"}], "spec.acme.fallback[0].email"),
        ([{"server": "https://two.test", "solvers": []}], "spec.acme.fallback[0].solvers"),
        (
            [{"server": "https://two.test", "caBundle": "bm90IGEgY2VydA=="}],
            "spec.acme.fallback[0].caBundle",
        ),
        (
            [{"server": "https://two.test", "externalAccountBinding": {"hmacKey": "aGk"}}],
            "spec.acme.fallback[0].externalAccountBinding.keyID",
        ),
        (
            [{"server": f"https://s{i}.test"} for i in range(MAX_FALLBACKS + 1)],
            "spec.acme.fallback",
        ),
    ],
)
def test_fallback_errors_name_the_field(fallback: Any, field: str) -> None:
    assert field in problems(acme(fallback=fallback))


def test_fallback_eab_key_is_stored_encrypted_not_in_the_spec(db: Any) -> None:
    spec = acme(
        externalAccountBinding={"keyID": "k0", "hmacKey": "Zmlyc3Qta2V5"},
        fallback=[
            {"server": "https://two.test/dir"},
            {
                "server": "https://three.test/dir",
                "externalAccountBinding": {"keyID": "k2", "hmacKey": "dGhpcmQta2V5"},
            },
        ],
    )
    issuer, _ = apply_issuer("iss", spec, actor="x")
    assert "dGhpcmQta2V5" not in str(issuer.spec) and "Zmlyc3Qta2V5" not in str(issuer.spec)
    eab = issuer.spec["acme"]["fallback"][1]["externalAccountBinding"]
    assert eab == {"keyID": "k2", "keySecretRef": {"name": "iss-eab-fallback-1", "key": "secret"}}
    assert read_secret_value("iss-eab-fallback-1", "secret") == "dGhpcmQta2V5"
    assert read_secret_value("iss-eab", "secret") == "Zmlyc3Qta2V5"
