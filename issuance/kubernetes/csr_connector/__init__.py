"""The Kubernetes CSR connector: CertificateSigningRequests mirrored into the approval queue
(`csr_mirror`), decisions and certificates written back (`csr_writeback`), each new revision
exported to a Secret (`secret_export`); the pass and its watcher are in `connector`, the
configuration from the environment in `config`, the API calls in `csr_api`."""
