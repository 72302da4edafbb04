"""The framework bypasses that earned their place (docs/decisions/0004-bypasses.md).

Each module here replaces a plain Django or DRF path that cost at least 5 % of its process's
CPU per certificate, measured; its docstring states the gain and what would make it
unnecessary, and a test compares it with the plain path. They reach nothing above the
models (tests/test_layers.py): callers pass in what they need, such as a wake-up.

- `compiled_query`: QuerySets compiled once, run with new parameters (worker row loads,
  the certificate controller's reads, the API token lookup);
- `claim_statements`: the worker's claim over all tables in one statement, and its release
  that also writes the timeline;
- `event_insert`: the timeline's batch as one multi-row INSERT;
- `model_save`: precompiled UPDATEs and INSERTs for resource saves, and compare-and-set
  writes that wake another row in the same statement;
- `http01_lookup`: the HTTP-01 token lookup, compiled once;
- `prebuilt_fields`: serializer output through fields built once per class.

Bypasses of other frameworks are whole modules in the package they serve:
`issuance/acme/protocol/jws.py` (JWS without josepy's generic machinery),
`issuance/acme/protocol/transport.py` (urllib3 pools in place of requests.Session),
`console/asgi_http.py` (plain HTTP under ASGI on long-lived threads) and
`issuance/acme/solvers/http01/asgi.py` (HTTP-01 answers in front of Django).
"""
