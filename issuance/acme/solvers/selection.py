"""Which of an issuer's `solvers` answers an authorization (cert-manager's selection rules).

A solver with `selector.matchLabels` is a candidate only if every one of those labels is on
the Certificate (its `metadata.labels`; a CertificateRequest made without a Certificate has
none). A solver that lists dnsNames or dnsZones is a candidate only if one of them fits
the name. For one identifier, the candidates are ranked:
1. a `selector.dnsNames` entry equal to the name (for wildcards: `*.example.com`);
2. a `selector.dnsZones` entry the name is in; the longest (most specific) zone wins;
3. a solver selecting by matchLabels alone, or with no selector at all (the default).
Within a rank (and a zone length), the solver with more matchLabels wins, so a solver
selecting by labels alone beats the default; then the order of the spec. A wildcard
identifier can only be proven with DNS-01, so HTTP-01 solvers are never candidates for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from issuance.shapes import SolverSpec

HTTP01 = "http-01"
DNS01 = "dns-01"


@dataclass(frozen=True)
class SolverChoice:
    index: int  # position in spec.acme.solvers
    solver: SolverSpec
    challenge_type: str


def challenge_type_of(solver: SolverSpec) -> str | None:
    if "dns01" in solver:
        return DNS01
    if "http01" in solver:
        return HTTP01
    return None


def _zone_match(name: str, zone: str) -> bool:
    zone = zone.lower().rstrip(".")
    return name == zone or name.endswith("." + zone)


def _labels_match(selector: Mapping[str, object], labels: Mapping[str, str]) -> int | None:
    """How many matchLabels the selector has if all are on the Certificate, else None."""
    wanted = selector.get("matchLabels") or {}
    if not isinstance(wanted, Mapping):
        return None
    if any(labels.get(str(key)) != value for key, value in wanted.items()):
        return None
    return len(wanted)


def select_solver(
    solvers: list[SolverSpec],
    dns_name: str,
    wildcard: bool,
    labels: Mapping[str, str] | None = None,
) -> SolverChoice | None:
    """The solver for `dns_name` (the identifier, without `*.`) of a Certificate with
    `labels`, or None if none fits."""
    base = dns_name.lower().rstrip(".")
    full = f"*.{base}" if wildcard else base
    # (rank, zone length, labels matched, -index): larger is better
    best: tuple[int, int, int, int] | None = None
    chosen: SolverChoice | None = None
    for index, solver in enumerate(solvers or []):
        if not isinstance(solver, dict):
            continue
        kind = challenge_type_of(solver)
        if kind is None or (wildcard and kind != DNS01):
            continue
        selector = solver.get("selector") or {}
        matched = _labels_match(selector, labels or {})
        if matched is None:
            continue
        names = [str(n).lower().rstrip(".") for n in selector.get("dnsNames") or []]
        zones = [str(z).lower().rstrip(".") for z in selector.get("dnsZones") or []]
        if not names and not zones:
            score = (0, 0, matched, -index)
        elif full in names:
            score = (2, 0, matched, -index)
        else:
            matching = [len(z) for z in zones if _zone_match(base, z)]
            if not matching:
                continue
            score = (1, max(matching), matched, -index)
        if best is None or score > best:
            best = score
            chosen = SolverChoice(index=index, solver=solver.copy(), challenge_type=kind)
    return chosen


def describe_no_solver(dns_name: str, wildcard: bool) -> str:
    name = f"*.{dns_name}" if wildcard else dns_name
    extra = " (wildcard names need a dns01 solver)" if wildcard else ""
    return f"no configured challenge solver can be used for {name}{extra}"
