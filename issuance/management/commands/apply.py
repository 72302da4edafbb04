"""`manage.py apply -f FILE`: apply cert-manager manifests (Issuer, ClusterIssuer, Certificate).

All documents are validated first; if any is invalid nothing is applied. Then issuers
and certificates are applied in one transaction (issuers first), printing kubectl-style
lines: `certificate.cert-manager.io/web created|configured|unchanged`.
"""

from __future__ import annotations

import getpass
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from issuance.models import Issuer
from issuance.specs import (
    SpecError,
    apply_certificate_ex,
    apply_issuer_ex,
    validate_certificate_spec,
    validate_issuer_spec,
)
from issuance.specs.certificate import check_name
from issuance.specs.issuer import IssuerPlan
from issuance.specs.outcome import Applied

API_VERSION = "cert-manager.io/v1"
KINDS = ("Issuer", "ClusterIssuer", "Certificate")
ISSUER_KINDS = ("Issuer", "ClusterIssuer")
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")
# metadata that means something in Kubernetes but nothing here; ignored quietly.
QUIET_METADATA = (
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
)


@dataclass(frozen=True)
class Document:
    index: int  # 1-based, as people count documents in a file
    kind: str
    name: str
    spec: dict[str, Any]

    @property
    def label(self) -> str:
        return f"document {self.index} ({self.kind}/{self.name or '?'})"


def _load(text: str) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise CommandError(f"invalid YAML: {exc}") from None


def _parse(index: int, raw: Any, notes: list[str]) -> tuple[Document | None, list[str]]:
    """Check the envelope of one document; returns (document, problems)."""
    if not isinstance(raw, dict):
        return None, [f"document {index}: must be a mapping with apiVersion, kind, metadata, spec"]
    kind = raw.get("kind")
    metadata: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    name = str(metadata["name"]) if isinstance(metadata.get("name"), str) else ""
    label = f"document {index} ({kind or '?'}/{name or '?'})"
    problems: list[str] = []
    if raw.get("apiVersion") != API_VERSION:
        problems.append(
            f"{label}: apiVersion: must be {API_VERSION} (got {raw.get('apiVersion')!r})"
        )
    if kind not in KINDS:
        problems.append(f"{label}: kind: unsupported kind {kind!r} (one of {', '.join(KINDS)})")
    problems += [f"{label}: {key}: unsupported field" for key in raw if key not in TOP_LEVEL]
    if not isinstance(raw.get("metadata"), dict):
        problems.append(f"{label}: metadata: is required (with a name)")
    for key in metadata:
        if key == "namespace":
            notes.append(f"{label}: metadata.namespace ignored (the console has no namespaces)")
        elif key != "name" and key not in QUIET_METADATA:
            problems.append(f"{label}: metadata.{key}: unsupported field")
    try:
        check_name(metadata.get("name"), "metadata.name")
    except SpecError as exc:
        problems += [f"{label}: {path}: {message}" for path, message in exc.errors]
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        problems.append(f"{label}: spec: is required (an object)")
    if problems:
        return None, problems
    assert isinstance(spec, dict)
    return Document(index, str(kind), name, spec), []


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "cli"


class Command(BaseCommand):
    help = (
        "Apply cert-manager Issuer, ClusterIssuer and Certificate manifests (like kubectl apply)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plans: dict[int, IssuerPlan] = {}  # validated issuer documents, by index

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-f", "--filename", required=True, help="YAML file, or - for stdin")
        parser.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
        parser.add_argument("--as", dest="actor", default="", help="who to record in events")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["filename"]
        if source == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(source).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot read {source}: {exc}") from None
        actor = options["actor"] or f"{_os_user()} (apply)"
        raws = _load(text)
        if not raws:
            raise CommandError(f"no documents in {source}")
        notes: list[str] = []
        docs, problems = self._validate(raws, notes)
        for note in notes:
            self.stderr.write(f"note: {note}")
        if problems:
            raise CommandError(
                "nothing applied:\n" + "\n".join(f"  {p}" for p in problems), returncode=1
            )
        if options["dry_run"]:
            for doc in docs:
                self.stdout.write(f"{doc.kind.lower()}.cert-manager.io/{doc.name} valid (dry run)")
            return
        with transaction.atomic():
            results = [(doc, self._apply(doc, actor)) for doc in docs]
        for doc, applied in results:
            self.stdout.write(f"{doc.kind.lower()}.cert-manager.io/{doc.name} {applied.outcome}")

    def _validate(self, raws: list[Any], notes: list[str]) -> tuple[list[Document], list[str]]:
        problems: list[str] = []
        docs: list[Document] = []
        for index, raw in enumerate(raws, start=1):
            doc, found = _parse(index, raw, notes)
            problems += found
            if doc:
                docs.append(doc)
        seen: dict[tuple[str, str], int] = {}
        for doc in docs:
            key = ("Issuer" if doc.kind in ISSUER_KINDS else doc.kind, doc.name)
            if key in seen:
                problems.append(f"{doc.label}: metadata.name: also defined in document {seen[key]}")
            seen.setdefault(key, doc.index)
        in_file = {d.name for d in docs if d.kind in ISSUER_KINDS}

        def issuer_exists(name: str) -> bool:
            return name in in_file or Issuer.objects.filter(name=name).exists()

        for doc in docs:
            try:
                if doc.kind in ISSUER_KINDS:
                    # Kept for _apply: an inline CA key is checked once, here.
                    self._plans[doc.index] = validate_issuer_spec(doc.name, doc.spec)
                else:
                    validate_certificate_spec(doc.name, doc.spec, issuer_exists=issuer_exists)
            except SpecError as exc:
                problems += [f"{doc.label}: {path}: {message}" for path, message in exc.errors]
        # Issuers first, so certificates in the same file can refer to them.
        docs.sort(key=lambda d: (d.kind not in ISSUER_KINDS, d.index))
        return docs, problems

    def _apply(self, doc: Document, actor: str) -> Applied[Any]:
        try:
            if doc.kind in ISSUER_KINDS:
                return apply_issuer_ex(
                    doc.name,
                    doc.spec,
                    cluster=doc.kind == "ClusterIssuer",
                    actor=actor,
                    plan=self._plans.get(doc.index),
                )
            return apply_certificate_ex(doc.name, doc.spec, actor=actor)
        except SpecError as exc:
            # Validated above; this only happens if the database changed in between.
            lines = [f"  {doc.label}: {path}: {message}" for path, message in exc.errors]
            raise CommandError("nothing applied:\n" + "\n".join(lines), returncode=1) from None
