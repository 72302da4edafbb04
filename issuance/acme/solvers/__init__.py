"""Challenge solvers: present an answer, check the world sees it as the CA will, clean up.

`base` (the Solver protocol), `registry` (the solver for a Challenge), `selection` (which of an
issuer's solvers answers an identifier), `selfcheck`, the DNS-01 solvers (`rfc2136`,
`webhook`, `lexicon_dns` with the provider blocks of `dnsproviders`), the DNS-01 preflight
(`preflight`, and `preflight_step`, the step in the issuer's `sign()` before an order), and
HTTP-01 answering (`http01/`).
"""
