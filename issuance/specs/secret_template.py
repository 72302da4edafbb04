"""A Certificate's `secretTemplate`: labels and annotations for its Secret, checked as
Kubernetes checks an object's metadata (the exported Secret must be accepted by the API
server)."""

from __future__ import annotations

from typing import Any, Final

from issuance.shapes import SecretTemplateSpec
from issuance.specs.errors import Errors
from issuance.specs.fields import check_object
from issuance.specs.labels import key_problem, value_problem

MAX_ANNOTATIONS_BYTES: Final = 256 * 1024  # Kubernetes' limit on all annotations together
# What the export writes itself (issuance/kubernetes/csr_connector/secret_export.py); a
# template cannot set them. cert-manager refuses cert-manager.io/ annotations in a template
# for the same reason.
RESERVED_ANNOTATION_PREFIXES: Final = ("cert-manager.io/", "issuance.console/")
RESERVED_LABELS: Final = ("app.kubernetes.io/managed-by",)


def validate_secret_template(value: Any, path: str, errors: Errors) -> SecretTemplateSpec:
    obj = check_object(value, path, errors, ("labels", "annotations"))
    if obj is None:
        return {}
    out: SecretTemplateSpec = {}
    labels = _string_map(obj, "labels", path, errors)
    for key, text in labels.items():
        where = f"{path}.labels[{key}]"
        if key in RESERVED_LABELS:
            errors.add(where, f"{key!r} is set by the console on the exported Secret")
        elif problem := value_problem(text):
            errors.add(where, problem)
    annotations = _string_map(obj, "annotations", path, errors)
    for key in annotations:
        if key.startswith(RESERVED_ANNOTATION_PREFIXES):
            errors.add(
                f"{path}.annotations[{key}]",
                f"{key.split('/')[0]}/ annotations are set by the console on the exported Secret",
            )
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        errors.add(f"{path}.annotations", f"must be at most {MAX_ANNOTATIONS_BYTES} bytes in all")
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = annotations
    return out


def _string_map(obj: dict[str, Any], key: str, path: str, errors: Errors) -> dict[str, str]:
    """A map of keys to strings (sorted by key, so a re-ordered file is no change)."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(f"{path}.{key}", "must be an object of key: string")
        return {}
    out: dict[str, str] = {}
    for name in sorted(value):
        where = f"{path}.{key}[{name}]"
        problem = key_problem(name)
        if problem:
            errors.add(where, problem)
        elif not isinstance(value[name], str):
            errors.add(where, "must be a string (quote numbers and booleans in YAML)")
        else:
            out[name] = value[name]
    return out
