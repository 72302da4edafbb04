"""cert-manager cluster mode: mirror a cluster's cert-manager resources, act on them as cmctl does.

kinds (what is mirrored), retry (cert-manager's backoff), scope (scoped roles), and the sync,
mirror and write-back modules; see docs/architecture.md, "cert-manager clusters".
"""
