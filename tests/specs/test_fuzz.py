"""Property tests: validators never crash and never accept an invalid DNS name or duration."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from issuance.shapes import CertificateSpec
from issuance.specs import SpecError, validate_certificate_spec
from issuance.timing.durations import parse_duration

# An independent statement of what we accept: RFC 1123 labels, optional "*." first.
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"^(\*\.)?(?:{_LABEL}\.)*{_LABEL}$")


def oracle_valid(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        pass
    return (
        len(name) <= 253
        and bool(_NAME.match(name))
        and not name.rsplit(".", 1)[-1].isdigit()
        and name != "*"
    )


def check(spec: dict[str, Any]) -> CertificateSpec | SpecError:
    try:
        return validate_certificate_spec("fuzz", spec, issuer_exists=None)
    except SpecError as exc:
        return exc


label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=70)
structured = st.builds(
    lambda wildcard, labels: ("*." if wildcard else "") + ".".join(labels),
    st.booleans(),
    st.lists(label, min_size=1, max_size=6),
)
any_name = st.one_of(
    structured,
    structured.map(str.upper),
    st.text(max_size=300),
    st.text(alphabet="aZ09-.*_ \u00fc:", max_size=80),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(any_name, min_size=1, max_size=4))
@example(["a" * 63 + ".b"])
@example(["1.2.3.4"])
@example(["*"])
@example(["x." * 126 + "y"])
def test_dns_names_never_crash_and_never_accept_invalid(names: list[str]) -> None:
    result = check({"dnsNames": names, "issuerRef": {"name": "i"}})
    lowered = [n.lower() for n in names]
    if isinstance(result, SpecError):
        assert result.errors and all(p.startswith("spec") for p, _ in result.errors)
        # Rejected only for a reason: an invalid name or a duplicate.
        assert not all(oracle_valid(n) for n in lowered) or len(set(lowered)) < len(lowered)
    else:
        assert result["dnsNames"] == lowered
        assert all(oracle_valid(n) for n in result["dnsNames"])
        assert len(set(lowered)) == len(lowered)


units = st.sampled_from(["h", "m", "s", "ms", "us", "ns"])
go_duration = st.builds(
    lambda sign, parts: sign + "".join(f"{n}{u}" for n, u in parts),
    st.sampled_from(["", "-", "+"]),
    st.lists(st.tuples(st.integers(0, 10**6), units), min_size=1, max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(go_duration, st.text(max_size=20)), st.one_of(st.none(), go_duration))
def test_durations_never_crash_and_stay_consistent(duration: str, renew: str | None) -> None:
    spec: dict[str, Any] = {
        "dnsNames": ["a.test"],
        "issuerRef": {"name": "i"},
        "duration": duration,
    }
    if renew is not None:
        spec["renewBefore"] = renew
    result = check(spec)
    if isinstance(result, SpecError):
        fields = {p for p, _ in result.errors}
        assert fields <= {"spec.duration", "spec.renewBefore"}
        return
    lifetime = parse_duration(duration)
    assert lifetime.total_seconds() >= 1
    # The stored form parses back to the same whole seconds.
    assert parse_duration(result["duration"]).total_seconds() == int(lifetime.total_seconds())
    if renew is not None:
        before = parse_duration(result["renewBefore"])
        assert 0 < before.total_seconds() < parse_duration(result["duration"]).total_seconds()
