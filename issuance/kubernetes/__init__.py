"""Kubernetes, in one package.

Shared: `json_client` (plain-dict calls with timeouts, watch streams) and `watcher` (a thread
that lists and watches one kind and queues what it sees, never touching the database).
Uses: `csr_connector/`, the CSR connector (CertificateSigningRequests into the approval queue and
back, Secret export), and `certmanager/`, cluster mode (a mirror of cert-manager's
resources, with renew/approve/deny written back as cmctl does). Neither subpackage imports
the other, and the shared modules import neither (import-linter contracts).
"""
