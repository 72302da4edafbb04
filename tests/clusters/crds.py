"""CustomResourceDefinitions for cert-manager's API groups, written here for the tests.

Group, version (v1), kinds, plural names, scope and the `status` subresource are cert-manager's
(its public API reference); the schemas keep every field (x-kubernetes-preserve-unknown-fields),
since the console reads objects, not validates them.
"""

from __future__ import annotations

from typing import Any

from issuance.kubernetes.certmanager.kinds import MIRRORED, VERSION, Kind

SHORT_NAMES = {
    "Certificate": ["cert", "certs"],
    "CertificateRequest": ["cr", "crs"],
    "Issuer": [],
    "ClusterIssuer": [],
    "Order": [],
    "Challenge": [],
}


def crd(kind: Kind) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.resource},
        "spec": {
            "group": kind.group,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": SHORT_NAMES[kind.kind],
                "categories": ["cert-manager"],
            },
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    return [crd(kind) for kind in MIRRORED]
