"""The Kubernetes connector: CSR mirroring, write-back and signing; Secret export."""
