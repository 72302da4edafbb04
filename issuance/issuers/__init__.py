"""Issuer kinds: how each signs a CertificateRequest (see issuance.issuers.base)."""
