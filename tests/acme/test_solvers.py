"""Solver selection per authorization: dnsNames > most specific dnsZones > default; every
matchLabels pair must be on the Certificate, and more matching labels win a tie."""

from __future__ import annotations

from issuance.acme.solvers.selection import DNS01, HTTP01, select_solver
from issuance.shapes import SolverSpec

# Solver specs are JSON as an Issuer's spec.acme.solvers holds them.
HTTP_DEFAULT: SolverSpec = {"http01": {}}
DNS_EXAMPLE: SolverSpec = {
    "selector": {"dnsZones": ["example.com"]},
    "dns01": {"rfc2136": {"nameserver": "a"}},
}
DNS_SUB: SolverSpec = {
    "selector": {"dnsZones": ["sub.example.com"]},
    "dns01": {"rfc2136": {"nameserver": "b"}},
}
HTTP_NAMED: SolverSpec = {"selector": {"dnsNames": ["www.sub.example.com"]}, "http01": {}}
DNS_WILDCARD_NAME: SolverSpec = {
    "selector": {"dnsNames": ["*.example.com"]},
    "dns01": {"webhook": {"url": "http://x"}},
}
SOLVERS = [HTTP_DEFAULT, DNS_EXAMPLE, DNS_SUB, HTTP_NAMED]


def test_no_selector_is_the_default() -> None:
    choice = select_solver(SOLVERS, "other.test", wildcard=False)
    assert choice is not None
    assert (choice.index, choice.challenge_type) == (0, HTTP01)


def test_most_specific_zone_wins_regardless_of_order() -> None:
    choice = select_solver(SOLVERS, "a.sub.example.com", wildcard=False)
    assert choice is not None
    assert choice.index == 2
    assert choice.solver["dns01"]["rfc2136"]["nameserver"] == "b"
    choice = select_solver(list(reversed(SOLVERS)), "a.sub.example.com", wildcard=False)
    assert choice is not None
    assert choice.solver["dns01"]["rfc2136"]["nameserver"] == "b"
    # The zone apex itself matches its zone.
    choice = select_solver(SOLVERS, "example.com", wildcard=False)
    assert choice is not None
    assert choice.index == 1


def test_zone_match_is_on_label_boundaries() -> None:
    choice = select_solver([DNS_EXAMPLE], "badexample.com", wildcard=False)
    assert choice is None


def test_dns_names_match_beats_zones() -> None:
    choice = select_solver(SOLVERS, "www.sub.example.com", wildcard=False)
    assert choice is not None
    assert (choice.index, choice.challenge_type) == (3, HTTP01)


def test_wildcard_needs_dns01() -> None:
    assert select_solver([HTTP_DEFAULT], "example.com", wildcard=True) is None
    choice = select_solver([HTTP_DEFAULT, DNS_EXAMPLE], "example.com", wildcard=True)
    assert choice is not None
    assert choice.challenge_type == DNS01
    # A dnsNames selector names the wildcard as written in the certificate.
    choice = select_solver([DNS_EXAMPLE, DNS_WILDCARD_NAME], "example.com", wildcard=True)
    assert choice is not None
    assert choice.index == 1


def test_nothing_matches() -> None:
    assert select_solver([DNS_SUB, HTTP_NAMED], "example.org", wildcard=False) is None
    assert select_solver([], "example.org", wildcard=False) is None


def test_first_of_equally_specific_solvers_wins() -> None:
    twin: SolverSpec = {"selector": {"dnsZones": ["example.com"]}, "http01": {}}
    choice = select_solver([DNS_EXAMPLE, twin], "a.example.com", wildcard=False)
    assert choice is not None
    assert choice.index == 0


# matchLabels (cert-manager's rules): every pair must be on the Certificate.
TEAM_A = {"team": "a"}
TEAM_A_PROD = {"team": "a", "env": "prod"}


def _solver(nameserver: str, **selector: object) -> SolverSpec:
    spec: dict[str, object] = {"dns01": {"rfc2136": {"nameserver": nameserver}}}
    if selector:
        spec["selector"] = selector
    return spec  # type: ignore[return-value]


def _pick(solvers: list[SolverSpec], name: str, labels: dict[str, str]) -> str | None:
    choice = select_solver(solvers, name, wildcard=False, labels=labels)
    return None if choice is None else choice.solver["dns01"]["rfc2136"]["nameserver"]


def test_match_labels_must_all_be_on_the_certificate() -> None:
    solvers = [_solver("team-a-prod", matchLabels=TEAM_A_PROD)]
    assert _pick(solvers, "a.example.com", TEAM_A_PROD) == "team-a-prod"
    assert _pick(solvers, "a.example.com", {**TEAM_A_PROD, "other": "x"}) == "team-a-prod"
    assert _pick(solvers, "a.example.com", TEAM_A) is None  # env missing
    assert _pick(solvers, "a.example.com", {"team": "a", "env": "dev"}) is None
    assert _pick(solvers, "a.example.com", {}) is None
    # No labels given at all (a request without a Certificate): as no labels.
    assert select_solver(solvers, "a.example.com", wildcard=False) is None


def test_match_labels_do_not_widen_a_name_selector() -> None:
    solvers = [_solver("zone", dnsZones=["example.com"], matchLabels=TEAM_A)]
    assert _pick(solvers, "a.example.com", TEAM_A) == "zone"
    assert _pick(solvers, "a.example.org", TEAM_A) is None
    assert _pick(solvers, "a.example.com", {"team": "b"}) is None


def test_labels_only_solver_beats_the_default_by_its_labels() -> None:
    solvers = [_solver("default"), _solver("labels", matchLabels=TEAM_A)]
    assert _pick(solvers, "a.example.com", TEAM_A) == "labels"
    assert _pick(solvers, "a.example.com", {"team": "b"}) == "default"


def test_more_matching_labels_win_among_equal_solvers() -> None:
    by_one = _solver("one", matchLabels=TEAM_A)
    by_two = _solver("two", matchLabels=TEAM_A_PROD)
    assert _pick([by_one, by_two], "a.example.com", TEAM_A_PROD) == "two"
    assert _pick([by_two, by_one], "a.example.com", TEAM_A_PROD) == "two"
    zone_one = _solver("zone-one", dnsZones=["example.com"], matchLabels=TEAM_A)
    zone_two = _solver("zone-two", dnsZones=["example.com"], matchLabels=TEAM_A_PROD)
    assert _pick([zone_one, zone_two], "a.example.com", TEAM_A_PROD) == "zone-two"
    name_none = _solver("name-none", dnsNames=["a.example.com"])
    name_one = _solver("name-one", dnsNames=["a.example.com"], matchLabels=TEAM_A)
    assert _pick([name_none, name_one], "a.example.com", TEAM_A) == "name-one"


def test_a_names_match_beats_more_labels() -> None:
    zone = _solver("zone", dnsZones=["example.com"], matchLabels=TEAM_A_PROD)
    name = _solver("name", dnsNames=["a.example.com"])
    assert _pick([zone, name], "a.example.com", TEAM_A_PROD) == "name"
    labels_only = _solver("labels", matchLabels=TEAM_A_PROD)
    assert _pick([labels_only, zone], "a.example.com", TEAM_A_PROD) == "zone"
    assert (
        _pick(
            [labels_only, _solver("plain-zone", dnsZones=["example.com"])],
            "a.example.com",
            TEAM_A_PROD,
        )
        == "plain-zone"
    )


def test_the_longer_zone_beats_more_labels() -> None:
    wide = _solver("wide", dnsZones=["example.com"], matchLabels=TEAM_A_PROD)
    narrow = _solver("narrow", dnsZones=["sub.example.com"])
    assert _pick([wide, narrow], "a.sub.example.com", TEAM_A_PROD) == "narrow"


def test_the_earlier_of_equally_labelled_solvers_wins() -> None:
    first = _solver("first", matchLabels=TEAM_A)
    second = _solver("second", matchLabels={"env": "prod"})
    assert _pick([first, second], "a.example.com", TEAM_A_PROD) == "first"
    assert _pick([second, first], "a.example.com", TEAM_A_PROD) == "second"
