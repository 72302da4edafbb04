"""Certificate specs: cert-manager's Certificate spec (supported subset), validated and stored."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from issuance.models import Certificate, Issuer, SecretExport, validate_resource_name
from issuance.observability import events
from issuance.pki.keys import ECDSA_CURVES, RSA_SIZES
from issuance.pki.signing import SUPPORTED_USAGES
from issuance.shapes import (
    CertificateSpec,
    IssuerRef,
    PrivateKeySpec,
    SecretExportRef,
    X509Subject,
)
from issuance.specs.errors import Errors, SpecError
from issuance.specs.extra_names import (
    refuse_for_acme,
    validate_name_constraints,
    validate_other_names,
)
from issuance.specs.fields import (
    check_object,
    opt_bool,
    opt_duration,
    opt_int,
    opt_resource_name,
    opt_str,
    opt_str_list,
)
from issuance.specs.labels import validate_labels
from issuance.specs.names import (
    normalize_dns_names,
    normalize_emails,
    normalize_ip_addresses,
    normalize_uris,
)
from issuance.specs.outcome import Applied, Outcome, changed_fields
from issuance.specs.outputs import validate_keystores, validate_output_formats
from issuance.specs.renewal import validate_renewal
from issuance.specs.secret_template import validate_secret_template
from issuance.timing.durations import format_duration
from issuance.worker.wakeup import notify_workers, wake

DEFAULT_DURATION = timedelta(hours=2160)
MAX_COMMON_NAME = 64
ISSUER_KINDS = ("Issuer", "ClusterIssuer")
ISSUER_GROUP = "cert-manager.io"
LABELS_PATH = "metadata.labels"

FIELDS = (
    "secretName",
    "commonName",
    "dnsNames",
    "ipAddresses",
    "uris",
    "emailAddresses",
    "subject",
    "duration",
    "renewBefore",
    "renewBeforePercentage",
    "issuerRef",
    "privateKey",
    "usages",
    "isCA",
    "revisionHistoryLimit",
    "encodeUsagesInRequest",
    "secretExport",  # extension: also write the key pair to a Kubernetes Secret
    "renewal",  # cert-manager 1.21: policy and renewal windows (specs/renewal.py)
    "additionalOutputFormats",  # offered for download (specs/outputs.py)
    "keystores",
    "otherNames",  # specs/extra_names.py
    "nameConstraints",
    "secretTemplate",  # specs/secret_template.py
)
UNSUPPORTED = {
    "literalSubject": "use commonName and subject instead",
    "signatureAlgorithm": "the signature algorithm follows the key type",
}
SUBJECT_LISTS: Final = (
    "organizations",
    "organizationalUnits",
    "countries",
    "localities",
    "provinces",
    "streetAddresses",
    "postalCodes",
)
SUBJECT_FIELDS = (*SUBJECT_LISTS, "serialNumber")
KEY_ALGORITHMS = ("RSA", "ECDSA", "Ed25519")
ROTATION_POLICIES = ("Always", "Never")
KEY_ENCODINGS = ("PKCS1", "PKCS8")
SAN_FIELDS = ("commonName", "dnsNames", "ipAddresses", "uris", "emailAddresses", "otherNames")
SAN_NORMALIZERS: dict[str, Callable[[list[str], str, Errors], list[str]]] = {
    "dnsNames": normalize_dns_names,
    "ipAddresses": normalize_ip_addresses,
    "uris": normalize_uris,
    "emailAddresses": normalize_emails,
}

IssuerExists = Callable[[str], bool]


def issuer_in_db(name: str) -> bool:
    return Issuer.objects.filter(name=name).exists()


class CertificateExists(Exception):
    """A create-only apply found a Certificate of that name."""


def _issuer_lock() -> str:
    """How a referenced issuer is kept from deletion until the transaction ends.

    On PostgreSQL the row is locked FOR KEY SHARE: that is all a DELETE must wait for, and
    it conflicts with nothing else. FOR UPDATE (select_for_update) made every create wait for
    every other create of the same issuer, and made the workers' inserts of requests, orders
    and challenges (whose foreign-key checks take KEY SHARE on the issuer row) wait for both:
    during bulk issuance those waits were most of PostgreSQL's statement time.
    """
    return " FOR KEY SHARE" if connection.vendor == "postgresql" else ""


def resolve_issuer(name: str) -> Issuer:
    """The referenced issuer, locked (see _issuer_lock); a SpecError if it does not exist."""
    table = connection.ops.quote_name(Issuer._meta.db_table)
    sql = f"SELECT * FROM {table} WHERE name = %s{_issuer_lock()}"  # noqa: S608
    found = list(Issuer.objects.raw(sql, [name]))
    issuer = found[0] if found else None
    if issuer is None:  # deleted since validation
        raise SpecError([("spec.issuerRef.name", f"unknown issuer {name!r}")])
    return issuer


def lock_issuer_pk(name: str) -> Any:
    """The primary key of the issuer named `name` (None if there is none), locked as by
    resolve_issuer. A Certificate only needs the key: a whole Issuer through the ORM's raw()
    cost ten times as much CPU."""
    quote = connection.ops.quote_name
    table = quote(Issuer._meta.db_table)
    pk = quote(Issuer._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {pk} FROM {table} WHERE name = %s{_issuer_lock()}", [name])  # noqa: S608
        row = cursor.fetchone()
    return row[0] if row else None


def certificate_exists(name: str) -> bool:
    # Plain SQL: one per API create, and the ORM compiled the same exists() anew each time.
    quote = connection.ops.quote_name
    table = quote(Certificate._meta.db_table)
    column = quote(Certificate._meta.get_field("name").column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table} WHERE {column} = %s LIMIT 1", [name])  # noqa: S608
        return cursor.fetchone() is not None


def validate_issuer_ref(
    value: Any, path: str, errors: Errors, issuer_exists: IssuerExists | None
) -> IssuerRef | None:
    ref = check_object(value, path, errors, ("name", "kind", "group"))
    if ref is None:
        return None
    name = opt_resource_name(ref, "name", path, errors)
    kind = opt_str(ref, "kind", path, errors, choices=ISSUER_KINDS) or "Issuer"
    group = opt_str(ref, "group", path, errors, choices=(ISSUER_GROUP,))
    if ref.get("name") is None:
        errors.add(f"{path}.name", "is required")
    if name is None:
        return None
    if issuer_exists is not None and not issuer_exists(name):
        errors.add(f"{path}.name", f"unknown issuer {name!r}")
    out: IssuerRef = {"name": name, "kind": kind}
    if group:
        out["group"] = group
    return out


def validate_usages(spec: dict[str, Any], path: str, errors: Errors) -> list[str] | None:
    usages = opt_str_list(spec, "usages", path, errors)
    if usages is None:
        return None
    out: list[str] = []
    for i, usage in enumerate(usages):
        if usage not in SUPPORTED_USAGES:
            errors.add(
                f"{path}.usages[{i}]",
                f"unknown usage {usage!r} (one of: {', '.join(sorted(SUPPORTED_USAGES))})",
            )
        elif usage in out:
            errors.add(f"{path}.usages[{i}]", f"duplicate usage {usage!r}")
        else:
            out.append(usage)
    return out


def _private_key(value: Any, path: str, errors: Errors) -> PrivateKeySpec | None:
    pk = check_object(value, path, errors, ("algorithm", "size", "rotationPolicy", "encoding"))
    if pk is None:
        return None
    out: PrivateKeySpec = {}
    algorithm = opt_str(pk, "algorithm", path, errors, choices=KEY_ALGORITHMS)
    size = opt_int(pk, "size", path, errors, minimum=0)
    if algorithm:
        out["algorithm"] = algorithm
    if size is not None:
        algo = algorithm or "RSA"
        if algo == "RSA" and size not in RSA_SIZES:
            errors.add(f"{path}.size", f"RSA keys must be one of {list(RSA_SIZES)} bits")
        elif algo == "ECDSA" and size not in ECDSA_CURVES:
            errors.add(f"{path}.size", f"ECDSA keys must be one of {list(ECDSA_CURVES)} bits")
        elif algo == "Ed25519" and size not in {0}:
            errors.add(f"{path}.size", "Ed25519 keys have a fixed size: leave size out")
        else:
            out["size"] = size
    rotation_policy = opt_str(pk, "rotationPolicy", path, errors, choices=ROTATION_POLICIES)
    if rotation_policy:
        out["rotationPolicy"] = rotation_policy
    encoding = opt_str(pk, "encoding", path, errors, choices=KEY_ENCODINGS)
    if encoding:
        out["encoding"] = encoding
    return out


def _subject(value: Any, path: str, errors: Errors) -> X509Subject | None:
    subject = check_object(value, path, errors, SUBJECT_FIELDS)
    if subject is None:
        return None
    out: X509Subject = {}
    for key in SUBJECT_LISTS:
        items = opt_str_list(subject, key, path, errors, max_len=64)
        if key == "countries":
            for i, country in enumerate(items or []):
                if len(country) != 2 or not (country.isascii() and country.isalpha()):
                    errors.add(f"{path}.{key}[{i}]", "must be a two-letter country code (ISO 3166)")
        if items:
            out[key] = items
    serial = opt_str(subject, "serialNumber", path, errors, max_len=64)
    if serial:
        out["serialNumber"] = serial
    return out


def _secret_export(value: Any, path: str, errors: Errors) -> SecretExportRef | None:
    export = check_object(value, path, errors, ("namespace", "name"))
    if export is None:
        return None
    out: SecretExportRef = {}
    for key in ("namespace", "name"):
        if export.get(key) is None:
            errors.add(f"{path}.{key}", "is required")
        item = opt_resource_name(export, key, path, errors)
        if item:
            out[key] = item
    return out


def validate_certificate_spec(
    name: str, spec: Any, *, issuer_exists: IssuerExists | None = issuer_in_db
) -> CertificateSpec:
    """Validate and normalize; returns the spec to store. Raises SpecError listing every problem.

    Normalization: DNS names lower-cased, durations in Go's canonical form, issuerRef.kind
    and secretName (the certificate's name) and duration (2160h) filled in when absent.
    `issuer_exists=None` skips the issuer lookup (pure validation).
    """
    errors = Errors()
    path = "spec"
    obj = check_object(spec, path, errors, FIELDS, hints=UNSUPPORTED)
    if obj is None:
        raise SpecError(errors.items)  # check_object said why
    # Each step adds its fields in turn (the stored order is the order of these steps).
    out: CertificateSpec = {
        "secretName": opt_resource_name(obj, "secretName", path, errors) or name
    }
    _subject_names(obj, path, errors, out)
    _lifetime(obj, path, errors, out)
    _issuer(obj, path, errors, issuer_exists, out)
    _key_and_usages(obj, path, errors, out)
    _options(obj, path, errors, out)
    errors.raise_if_any()
    return out


def _subject_names(obj: dict[str, Any], path: str, errors: Errors, out: CertificateSpec) -> None:
    """commonName, the SANs (normalized; at least one of them) and subject."""
    common_name = opt_str(obj, "commonName", path, errors, max_len=MAX_COMMON_NAME)
    if common_name:
        out["commonName"] = common_name
    for key in ("dnsNames", "ipAddresses", "uris", "emailAddresses"):
        items = opt_str_list(obj, key, path, errors)
        if items:
            out[key] = SAN_NORMALIZERS[key](items, f"{path}.{key}", errors)
    if obj.get("otherNames") is not None:
        other_names = validate_other_names(obj["otherNames"], f"{path}.otherNames", errors)
        if other_names:
            out["otherNames"] = other_names
    if not any(obj.get(k) for k in SAN_FIELDS):
        errors.add(
            path,
            "at least one of commonName, dnsNames, ipAddresses, uris, emailAddresses or otherNames",
        )
    if "subject" in obj:
        subject = _subject(obj["subject"], f"{path}.subject", errors)
        if subject:
            out["subject"] = subject


def _lifetime(obj: dict[str, Any], path: str, errors: Errors, out: CertificateSpec) -> None:
    """duration (default 2160h), and renewBefore (below duration) or renewBeforePercentage."""
    duration = opt_duration(obj, "duration", path, errors)
    out["duration"] = duration[0] if duration else format_duration(DEFAULT_DURATION)
    lifetime = duration[1] if duration else DEFAULT_DURATION
    renew_before = opt_duration(obj, "renewBefore", path, errors)
    if renew_before:
        if renew_before[1] >= lifetime:
            errors.add(
                f"{path}.renewBefore",
                f"must be less than duration ({renew_before[0]} >= {out['duration']})",
            )
        out["renewBefore"] = renew_before[0]
    percentage = opt_int(obj, "renewBeforePercentage", path, errors, minimum=1, maximum=99)
    if percentage is not None:
        out["renewBeforePercentage"] = percentage
    if obj.get("renewBefore") is not None and obj.get("renewBeforePercentage") is not None:
        errors.add(
            f"{path}.renewBeforePercentage", "renewBefore and renewBeforePercentage are exclusive"
        )


def _issuer(
    obj: dict[str, Any],
    path: str,
    errors: Errors,
    issuer_exists: IssuerExists | None,
    out: CertificateSpec,
) -> None:
    """issuerRef: required, and naming an issuer that exists (unless the lookup is skipped)."""
    if obj.get("issuerRef") is None:
        errors.add(f"{path}.issuerRef", "is required")
        return
    ref = validate_issuer_ref(obj["issuerRef"], f"{path}.issuerRef", errors, issuer_exists)
    if ref:
        out["issuerRef"] = ref


def _key_and_usages(obj: dict[str, Any], path: str, errors: Errors, out: CertificateSpec) -> None:
    """privateKey (algorithm, size, rotationPolicy, encoding) and usages."""
    if "privateKey" in obj:
        private_key = _private_key(obj["privateKey"], f"{path}.privateKey", errors)
        if private_key:
            out["privateKey"] = private_key
    usages = validate_usages(obj, path, errors)
    if usages:
        out["usages"] = usages


def _options(obj: dict[str, Any], path: str, errors: Errors, out: CertificateSpec) -> None:
    """isCA, nameConstraints, encodeUsagesInRequest, revisionHistoryLimit, secretExport and
    renewal."""
    for key in ("isCA", "encodeUsagesInRequest"):
        flag = opt_bool(obj, key, path, errors)
        if flag is not None:
            out[key] = flag
    if obj.get("nameConstraints") is not None:
        where = f"{path}.nameConstraints"
        constraints = validate_name_constraints(obj["nameConstraints"], where, errors)
        if not out.get("isCA"):
            errors.add(where, "only a CA certificate carries name constraints: set isCA: true")
        if constraints:
            out["nameConstraints"] = constraints
    limit = opt_int(obj, "revisionHistoryLimit", path, errors, minimum=1)
    if limit is not None:
        out["revisionHistoryLimit"] = limit
    if "secretExport" in obj:
        export = _secret_export(obj["secretExport"], f"{path}.secretExport", errors)
        if export:
            out["secretExport"] = export
    if obj.get("secretTemplate") is not None:
        template = validate_secret_template(obj["secretTemplate"], f"{path}.secretTemplate", errors)
        if template:
            out["secretTemplate"] = template
    if obj.get("renewal") is not None:
        renewal = validate_renewal(obj["renewal"], f"{path}.renewal", errors)
        if renewal:
            out["renewal"] = renewal
    formats = validate_output_formats(obj, path, errors)
    if formats:
        out["additionalOutputFormats"] = formats
    if obj.get("keystores") is not None:
        keystores = validate_keystores(obj["keystores"], f"{path}.keystores", errors)
        if keystores:
            out["keystores"] = keystores


def check_name(name: Any, path: str = "name") -> str:
    if not isinstance(name, str):
        raise SpecError([(path, "is required (a string)")])
    try:
        validate_resource_name(name)
    except ValidationError as exc:
        raise SpecError([(path, " ".join(exc.messages))]) from None
    return name


@transaction.atomic
def apply_certificate_ex(
    name: str,
    spec: Any,
    *,
    actor: str,
    create_only: bool = False,
    labels: Any = None,
) -> Applied[Certificate]:
    """Create or update a Certificate from a spec; a changed spec bumps the generation.

    `create_only` (POST): raises CertificateExists, before validating the spec, if a
    Certificate of that name exists. Two such creates racing for one name: the second
    INSERT fails with IntegrityError.

    `labels` (metadata.labels, checked as Kubernetes checks them) replace the stored ones;
    None keeps them (a new Certificate has none). A change of labels alone is `configured`
    but no new generation: labels are metadata, and as in Kubernetes metadata.generation
    counts spec changes only. Nor does it wake the Certificate: the certificates
    controller's trigger compares the issued certificate with the spec, which is unchanged,
    so a label change never starts an issuance. The labels are read when the next order
    picks its solvers (selector.matchLabels).
    """
    check_name(name)
    if create_only and certificate_exists(name):
        raise CertificateExists(name)
    label_errors = Errors()
    new_labels = None if labels is None else validate_labels(labels, LABELS_PATH, label_errors)
    try:
        normalized, issuer_pk = _validate_and_lock_issuer(name, spec)
    except SpecError as exc:  # every problem at once: the labels' and the spec's
        raise SpecError([*label_errors.items, *exc.errors]) from None
    label_errors.raise_if_any()
    cert = None
    if not create_only:
        cert = Certificate.objects.select_for_update().filter(name=name).first()
    if cert is None:
        return _insert_certificate(name, normalized, issuer_pk, actor, new_labels or {})
    if new_labels is not None and new_labels != cert.labels:
        _store_labels(cert, new_labels, actor, save=cert.spec == normalized)
    elif cert.spec == normalized:
        return Applied(cert, Outcome.UNCHANGED)
    if cert.spec == normalized:
        return Applied(cert, Outcome.CONFIGURED)
    return _store_changed_spec(cert, normalized, issuer_pk, actor)


def validate_certificate_labels(value: Any, path: str = LABELS_PATH) -> dict[str, str]:
    """A Certificate's labels, checked (a SpecError naming each bad key or value)."""
    errors = Errors()
    out = validate_labels(value, path, errors)
    errors.raise_if_any()
    return out


def _store_labels(cert: Certificate, labels: dict[str, str], actor: str, *, save: bool) -> None:
    """New labels, recorded; saved here unless a changed spec is saved with them."""
    before = cert.labels if isinstance(cert.labels, dict) else {}
    keys = sorted(k for k in set(before) | set(labels) if before.get(k) != labels.get(k))
    cert.labels = labels
    if save:
        cert.save(update_fields=["labels", "updated_at"])
    events.record(
        "Certificate",
        cert.name,
        "LabelsChanged",
        f"Labels changed ({', '.join(keys)})",
        actor=actor,
        certificate_name=cert.name,
    )


def _validate_and_lock_issuer(name: str, spec: Any) -> tuple[CertificateSpec, Any]:
    """The normalized spec and its issuer's primary key, the issuer locked until the
    transaction ends (see _issuer_lock). The issuer check of validation is the locking
    lookup itself: one query, not two."""
    issuer_pks: dict[str, Any] = {}

    def issuer_exists(issuer_name: str) -> bool:
        issuer_pks[issuer_name] = lock_issuer_pk(issuer_name)
        return issuer_pks[issuer_name] is not None

    normalized = validate_certificate_spec(name, spec, issuer_exists=issuer_exists)
    issuer_name = normalized["issuerRef"]["name"]
    issuer_pk = issuer_pks.get(issuer_name) or lock_issuer_pk(issuer_name)
    if issuer_pk is None:  # only if validation skipped the lookup, which it never does
        raise SpecError([("spec.issuerRef.name", f"unknown issuer {issuer_name!r}")])
    if normalized.get("otherNames") or normalized.get("nameConstraints"):
        kind = Issuer.objects.filter(pk=issuer_pk).values_list("kind", flat=True).first()
        refuse_for_acme(normalized, kind or "")
    return normalized, issuer_pk


def _insert_certificate(
    name: str, normalized: CertificateSpec, issuer_pk: Any, actor: str, labels: dict[str, str]
) -> Applied[Certificate]:
    """A new Certificate, due at once, as wake() would leave it (due_at now, wake_seq bumped
    from 0), but by the INSERT itself rather than an UPDATE right after it."""
    cert = Certificate(
        name=name,
        spec=normalized,
        issuer_id=issuer_pk,
        secret_name=normalized["secretName"],
        labels=labels,
        due_at=timezone.now(),
        wake_seq=1,
    )
    cert.refresh_search_text()
    cert.save()
    events.record(
        "Certificate", name, "Created", "Certificate created", actor=actor, certificate_name=name
    )
    transaction.on_commit(notify_workers)
    return Applied(cert, Outcome.CREATED)


def _store_changed_spec(
    cert: Certificate, normalized: CertificateSpec, issuer_pk: Any, actor: str
) -> Applied[Certificate]:
    """A changed spec: stored with generation + 1, recorded, and the Certificate woken."""
    fields = changed_fields(cert.spec, normalized)
    cert.spec = normalized
    cert.issuer_id = issuer_pk
    cert.secret_name = normalized["secretName"]
    cert.generation += 1
    cert.refresh_search_text()
    cert.save(
        update_fields=[
            "spec",
            "issuer",
            "secret_name",
            "labels",
            "generation",
            "search_text",
            "updated_at",
        ]
    )
    if "spec.secretTemplate" in fields:  # the exported Secret's metadata, without a re-issue
        SecretExport.objects.filter(certificate=cert).update(
            exported_revision=None, next_attempt_at=None, attempts=0
        )
    events.record(
        "Certificate",
        cert.name,
        "SpecChanged",
        f"Spec changed ({', '.join(fields)}); generation {cert.generation}",
        actor=actor,
        certificate_name=cert.name,
    )
    wake(cert)
    return Applied(cert, Outcome.CONFIGURED)


def apply_certificate(name: str, spec: Any, *, actor: str) -> tuple[Certificate, bool]:
    applied = apply_certificate_ex(name, spec, actor=actor)
    return applied.obj, applied.created
