"""cert-manager's `additionalOutputFormats` and `keystores` Certificate fields, validated.

They say which extra files a Certificate's key pair is offered as: on the scoped download
endpoint (issuance/delivery/) and, as cert-manager writes them, in an exported Secret.
"""

from __future__ import annotations

from typing import Any

from issuance.shapes import KeystoresSpec, OutputFormat
from issuance.specs.errors import Errors
from issuance.specs.fields import check_object, opt_bool, opt_list, opt_str, secret_key_selector

OUTPUT_FORMAT_TYPES = ("CombinedPEM", "DER")
PKCS12_PROFILES = ("LegacyRC2", "LegacyDES", "Modern2023")
KEYSTORE_FIELDS = {
    "pkcs12": ("create", "passwordSecretRef", "profile"),
    "jks": ("create", "passwordSecretRef", "alias"),
}


def validate_output_formats(obj: dict[str, Any], path: str, errors: Errors) -> list[OutputFormat]:
    """`additionalOutputFormats: [{type: CombinedPEM|DER}]`, each type at most once."""
    items = opt_list(obj, "additionalOutputFormats", path, errors) or []
    out: list[OutputFormat] = []
    for index, item in enumerate(items):
        where = f"{path}.additionalOutputFormats[{index}]"
        entry = check_object(item, where, errors, ("type",))
        if entry is None:
            continue
        kind = entry.get("type")
        if kind not in OUTPUT_FORMAT_TYPES:
            errors.add(f"{where}.type", f"must be one of {', '.join(OUTPUT_FORMAT_TYPES)}")
        elif any(seen["type"] == kind for seen in out):
            errors.add(f"{where}.type", f"{kind} is listed twice")
        else:
            out.append({"type": kind})
    return out


def validate_keystores(value: Any, path: str, errors: Errors) -> KeystoresSpec:
    """`keystores: {pkcs12: {create, passwordSecretRef, profile}, jks: {create,
    passwordSecretRef, alias}}`: `create` and `passwordSecretRef` required, as in cert-manager."""
    obj = check_object(value, path, errors, tuple(KEYSTORE_FIELDS))
    out: KeystoresSpec = {}
    if obj is None:
        return out
    for kind, allowed in KEYSTORE_FIELDS.items():
        if obj.get(kind) is None:
            continue
        where = f"{path}.{kind}"
        store = check_object(obj[kind], where, errors, allowed)
        if store is None:
            continue
        create = opt_bool(store, "create", where, errors)
        if create is None:
            errors.add(f"{where}.create", "is required")
        if store.get("passwordSecretRef") is None:
            errors.add(f"{where}.passwordSecretRef", "is required")
            ref = None
        else:
            ref = secret_key_selector(
                store["passwordSecretRef"], f"{where}.passwordSecretRef", errors, key_required=True
            )
        entry: dict[str, Any] = {"create": bool(create)}
        if ref:
            entry["passwordSecretRef"] = ref
        if kind == "pkcs12":
            profile = opt_str(store, "profile", where, errors, max_len=32)
            if profile is not None and profile not in PKCS12_PROFILES:
                errors.add(f"{where}.profile", f"must be one of {', '.join(PKCS12_PROFILES)}")
            elif profile:
                entry["profile"] = profile
        else:
            alias = opt_str(store, "alias", where, errors, max_len=253)
            if alias:
                entry["alias"] = alias
        out[kind] = entry  # type: ignore[literal-required]
    return out
