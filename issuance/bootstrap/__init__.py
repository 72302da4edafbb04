"""Bootstrap tokens and the small API external CSR clients (kubelet-like agents) use."""
