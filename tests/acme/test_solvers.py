"""Solver selection per authorization: dnsNames > most specific dnsZones > default."""

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
