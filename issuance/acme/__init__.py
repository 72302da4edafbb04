"""ACME, in one package: talking to a CA, keeping what outlives a request, and answering its
challenges.

- `protocol/`: RFC 8555 itself (JWS, nonces, the directory, orders, ARI, revocation). It
  takes and returns plain values and never imports the models (an import-linter contract
  in pyproject.toml); its errors derive from the controller errors, so the worker's backoff
  applies to them.
- What outlives a request, kept in the database: each CA's pauses (`ratelimit`) and
  reachability (`health`), cached per process (`servers`), the client's view of both
  (`record`), the issuers' accounts (`accounts`), the choice of CA per order (`fallback`) and
  ARI renewal windows (`ari`).
- The `acme` issuer kind (`issuer`: `sign()` and the issuer's Ready condition) and the ACME
  section of an issuer spec (`issuer_spec`).
- `solvers/`: which solver answers an identifier (`selection`), the DNS-01 and HTTP-01
  solvers, the self-checks, and the DNS-01 preflight (`preflight`, run by `preflight_step`
  before an order is spent).

The Order and Challenge resources keep their model, API and controller modules beside the
other resources' (`issuance/models/`, `issuance/api/`, `issuance/controllers/`).
"""
