"""`manage.py apply -f FILE`: apply cert-manager manifests (Issuer, ClusterIssuer, Certificate)
and the console's own notification objects (NotificationChannel, NotificationRule;
issuance/cli/notifications.py).

All documents are validated first; if any is invalid nothing is applied. Then they are
applied in one transaction (issuers, certificates, channels, rules: each before what refers
to it, whatever the order in the file), printing kubectl-style lines:
`certificate.cert-manager.io/web created|configured|unchanged`. What Kubernetes adds to a
stored object (`kubectl get -o yaml`: uid, status, …) is ignored with a note
(issuance.specs.kubernetes_metadata), as the API ignores it. A Certificate's
`metadata.labels` are kept (replacing the stored ones); other kinds' labels are ignored.
"""

from __future__ import annotations

import getpass
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from issuance.cli import notifications
from issuance.models import Issuer, NotificationChannel
from issuance.notifications import channel_store
from issuance.notifications import rules as rule_store
from issuance.specs import (
    SpecError,
    apply_certificate_ex,
    apply_issuer_ex,
    validate_certificate_spec,
    validate_issuer_spec,
)
from issuance.specs.certificate import check_name, validate_certificate_labels
from issuance.specs.issuer import IssuerPlan
from issuance.specs.kubernetes_metadata import METADATA_FIELDS, ignored_fields
from issuance.specs.outcome import Applied

API_VERSION = "cert-manager.io/v1"
ISSUER_KINDS = ("Issuer", "ClusterIssuer")
# The order they are applied in.
KINDS = (*ISSUER_KINDS, "Certificate", *notifications.KINDS)
API_VERSIONS = {
    **dict.fromkeys(("Issuer", "ClusterIssuer", "Certificate"), API_VERSION),
    **dict.fromkeys(notifications.KINDS, notifications.API_VERSION),
}
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")


@dataclass(frozen=True)
class Document:
    index: int  # 1-based, as people count documents in a file
    kind: str
    name: str
    spec: dict[str, Any]
    # A Certificate's metadata.labels, checked (other kinds' labels are ignored).
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"document {self.index} ({self.kind}/{self.name or '?'})"

    @property
    def resource(self) -> str:
        """kubectl's name of it: `certificate.cert-manager.io/web`."""
        return f"{self.kind.lower()}.{API_VERSIONS[self.kind].split('/')[0]}/{self.name}"


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
    expected = API_VERSIONS.get(str(kind), API_VERSION)
    if raw.get("apiVersion") != expected:
        problems.append(f"{label}: apiVersion: must be {expected} (got {raw.get('apiVersion')!r})")
    if kind not in KINDS:
        problems.append(f"{label}: kind: unsupported kind {kind!r} (one of {', '.join(KINDS)})")
    problems += [f"{label}: {key}: unsupported field" for key in raw if key not in TOP_LEVEL]
    if not isinstance(raw.get("metadata"), dict):
        problems.append(f"{label}: metadata: is required (with a name)")
    for key in metadata:
        if key == "namespace":
            notes.append(f"{label}: metadata.namespace ignored (the console has no namespaces)")
        elif key not in METADATA_FIELDS:
            problems.append(f"{label}: metadata.{key}: unsupported field")
    # What `kubectl get -o yaml` prints besides the manifest: applies, with a note.
    notes += [f"{label}: {note}" for note in ignored_fields(raw)]
    try:
        check_name(metadata.get("name"), "metadata.name")
    except SpecError as exc:
        problems += [f"{label}: {path}: {message}" for path, message in exc.errors]
    labels: dict[str, str] = {}
    if kind == "Certificate":
        try:
            labels = validate_certificate_labels(metadata.get("labels"))
        except SpecError as exc:
            problems += [f"{label}: {path}: {message}" for path, message in exc.errors]
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        problems.append(f"{label}: spec: is required (an object)")
    if problems:
        return None, problems
    assert isinstance(spec, dict)
    return Document(index, str(kind), name, spec, labels), []


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "cli"


class Command(BaseCommand):
    help = (
        "Apply cert-manager Issuer, ClusterIssuer and Certificate manifests, and "
        "NotificationChannel and NotificationRule ones (like kubectl apply)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plans: dict[int, IssuerPlan] = {}  # validated issuer documents, by index
        self._rules: dict[int, dict[str, Any]] = {}  # validated rule documents, by index
        self._channels: dict[int, channel_store.ChannelInput] = {}

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
                self.stdout.write(f"{doc.resource} valid (dry run)")
            return
        with transaction.atomic():
            results = [(doc, self._apply(doc, actor)) for doc in docs]
        for doc, applied in results:
            self.stdout.write(f"{doc.resource} {applied}")

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
        channels_in_file = {d.name for d in docs if d.kind == notifications.CHANNEL}

        def issuer_exists(name: str) -> bool:
            return name in in_file or Issuer.objects.filter(name=name).exists()

        def channel_exists(name: str) -> bool:
            return (
                name in channels_in_file or NotificationChannel.objects.filter(name=name).exists()
            )

        for doc in docs:
            wrong: list[tuple[str, str]] = []
            if doc.kind == notifications.RULE:
                self._rules[doc.index], wrong = notifications.rule_changes(doc.spec, channel_exists)
            elif doc.kind == notifications.CHANNEL:
                self._channels[doc.index], wrong = notifications.channel_input(doc.spec)
            problems += [f"{doc.label}: {path}: {message}" for path, message in wrong]
            if doc.kind in notifications.KINDS:
                continue
            try:
                if doc.kind in ISSUER_KINDS:
                    # Kept for _apply: an inline CA key is checked once, here.
                    self._plans[doc.index] = validate_issuer_spec(doc.name, doc.spec)
                else:
                    validate_certificate_spec(doc.name, doc.spec, issuer_exists=issuer_exists)
            except SpecError as exc:
                problems += [f"{doc.label}: {path}: {message}" for path, message in exc.errors]
        # Issuers first, so certificates in the same file can refer to them; channels before
        # their rules.
        docs.sort(key=lambda d: (KINDS.index(d.kind) if d.kind not in ISSUER_KINDS else 0, d.index))
        return docs, problems

    def _apply(self, doc: Document, actor: str) -> str:
        try:
            if doc.kind == notifications.CHANNEL:
                return channel_store.apply(doc.name, self._channels[doc.index], actor)
            if doc.kind == notifications.RULE:
                return rule_store.replace(doc.name, self._rules[doc.index], actor).outcome
        except (channel_store.ChannelError, rule_store.RuleError) as exc:
            # Validated above; this only happens if the database changed in between.
            lines = [
                f"  {doc.label}: spec.{path}: {message}" for path, message in exc.errors.items()
            ]
            raise CommandError("nothing applied:\n" + "\n".join(lines), returncode=1) from None
        return self._apply_cert_manager(doc, actor).outcome

    def _apply_cert_manager(self, doc: Document, actor: str) -> Applied[Any]:
        try:
            if doc.kind in ISSUER_KINDS:
                return apply_issuer_ex(
                    doc.name,
                    doc.spec,
                    cluster=doc.kind == "ClusterIssuer",
                    actor=actor,
                    plan=self._plans.get(doc.index),
                )
            # The manifest's labels replace the stored ones, as its spec does (none: none).
            return apply_certificate_ex(doc.name, doc.spec, actor=actor, labels=doc.labels)
        except SpecError as exc:
            # Validated above; this only happens if the database changed in between.
            lines = [f"  {doc.label}: {path}: {message}" for path, message in exc.errors]
            raise CommandError("nothing applied:\n" + "\n".join(lines), returncode=1) from None
