"""What Kubernetes adds to an object it stores, which `kubectl get -o yaml` prints back.

`manage.py apply -f` and the API (POST/PUT/PATCH of Issuers and Certificates) both ignore
these fields, so that a manifest copied out of a cluster applies here as it is, and both say
which ones they ignored: apply as a `note:` line, the API as a `Warning` header, as the
Kubernetes API server does (docs/cert-manager-differences.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# metadata fields the API server sets (or kubectl's server-side apply records); they describe
# the object in that cluster, and mean nothing to the console.
ADDED_METADATA = (
    "ownerReferences",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
)
# metadata the console reads (name; a Certificate's labels, which ACME solvers'
# selector.matchLabels select by) or takes and ignores (namespace: with a note from apply;
# annotations, and other kinds' labels, quietly). Any other metadata field is refused, by
# apply and the API.
KEPT_METADATA = ("name", "namespace", "labels", "annotations")
METADATA_FIELDS = (*KEPT_METADATA, *ADDED_METADATA)
# kubectl apply's record of the last manifest it applied (client-side apply).
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
WHY = {
    "ownerReferences": "ownership is a cluster's",
    "uid": "set by Kubernetes",
    "resourceVersion": "set by Kubernetes",
    "creationTimestamp": "set by Kubernetes",
    "generation": "the console counts its own",
    "managedFields": "set by Kubernetes",
}


def ignored_fields(manifest: Any) -> list[str]:
    """The notes for the Kubernetes-added fields in `manifest`, in a stable order."""
    if not isinstance(manifest, Mapping):
        return []
    notes: list[str] = []
    metadata = manifest.get("metadata")
    if isinstance(metadata, Mapping):
        notes += [
            f"metadata.{key} ignored ({WHY[key]})" for key in ADDED_METADATA if key in metadata
        ]
        annotations = metadata.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
            notes.append(f"metadata.annotations[{LAST_APPLIED}] ignored (kubectl's record)")
    if "status" in manifest:
        notes.append("status ignored (the console reports its own)")
    return notes
