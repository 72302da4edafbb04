"""cert-manager cluster mode: mirror a cluster's cert-manager resources, act on them as cmctl does.

kinds (what is mirrored), kubeconfig (a cluster's API client), cluster_api (the calls),
cluster_check (API versions and permissions), retry (cert-manager's backoff), sync (the
worker step), mirror (rows from objects), cluster_actions and writeback (renew, approve and
deny, queued then written); scoped roles are in issuance.access.scope. See
docs/architecture.md, "cert-manager clusters".
"""
