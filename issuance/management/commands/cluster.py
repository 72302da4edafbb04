"""`manage.py cluster add|list|check|remove`: the cert-manager clusters the console mirrors.

    cluster add NAME --kubeconfig FILE [--context C] [--min-backoff 1h] [--max-backoff 32h]
    cluster add NAME --in-cluster [...]   the cluster this process runs in, as its ServiceAccount
    cluster list
    cluster check NAME      discovery + access review now: API versions, missing permissions
    cluster remove NAME

The kubeconfig is validated before anything is stored (an error names the field) and is
stored encrypted; it is never printed. The worker's sync step connects to a new cluster
within seconds (issuance/kubernetes/certmanager/sync.py).
"""

from __future__ import annotations

import getpass
import re
from argparse import ArgumentParser
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from issuance.kubernetes.certmanager import kubeconfig
from issuance.kubernetes.certmanager.cluster_api import ClusterApi
from issuance.kubernetes.certmanager.cluster_check import check
from issuance.kubernetes.certmanager.in_cluster import ServiceAccount
from issuance.models import Cluster
from issuance.models.cluster import DEFAULT_MAX_BACKOFF_SECONDS, DEFAULT_MIN_BACKOFF_SECONDS
from issuance.observability import events
from issuance.timing.durations import DurationError, format_duration, parse_duration

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _actor(options: dict[str, Any]) -> str:
    return str(options.get("as_user") or f"cli:{getpass.getuser()}")


def _seconds(field: str, value: str) -> int:
    try:
        seconds = int(parse_duration(value).total_seconds())
    except DurationError as exc:
        raise CommandError(f"{field}: {exc}") from None
    if seconds < 1:
        raise CommandError(f"{field}: must be at least 1s")
    return seconds


def _span(seconds: int) -> str:
    return format_duration(timedelta(seconds=seconds))


class Command(BaseCommand):
    help = "Add, list, check and remove the cert-manager clusters the console mirrors."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        add = sub.add_parser("add", help="add a cluster (its kubeconfig is stored encrypted)")
        add.add_argument("name", help="a short name: lowercase letters, digits and '-'")
        source = add.add_mutually_exclusive_group(required=True)
        source.add_argument("--kubeconfig", metavar="FILE")
        source.add_argument(
            "--in-cluster",
            action="store_true",
            help="the cluster this console runs in, as its pod's ServiceAccount (no kubeconfig)",
        )
        add.add_argument("--context", default="", help="default: the current-context")
        add.add_argument(
            "--min-backoff",
            default=_span(DEFAULT_MIN_BACKOFF_SECONDS),
            help="cert-manager's first retry delay after a failed issuance (default 1h)",
        )
        add.add_argument(
            "--max-backoff",
            default=_span(DEFAULT_MAX_BACKOFF_SECONDS),
            help="cert-manager's longest retry delay (default 32h)",
        )
        add.add_argument("--as", dest="as_user", help="who to record as the actor")
        sub.add_parser("list", help="clusters, their state and what they lack")
        chk = sub.add_parser("check", help="API versions and missing permissions, now")
        chk.add_argument("name")
        remove = sub.add_parser("remove", help="stop mirroring a cluster and forget its objects")
        remove.add_argument("name")
        remove.add_argument("--as", dest="as_user", help="who to record as the actor")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"do_{options['verb']}")(options)

    # -- add -----------------------------------------------------------------------------------
    def do_add(self, options: dict[str, Any]) -> None:
        name = options["name"]
        if not NAME.match(name):
            raise CommandError(
                "name: use at most 63 lowercase letters, digits and '-' (not at either end)"
            )
        if Cluster.objects.filter(name=name).exists():
            raise CommandError(f"name: a cluster named {name!r} exists already")
        text, account = "", None
        if options["in_cluster"]:
            if options["context"]:
                raise CommandError("context: an in-cluster cluster has no kubeconfig context")
            account = ServiceAccount.from_environment()
        else:
            text = self._read(options["kubeconfig"])
        try:
            if account is not None:
                account.validate()
            else:
                kubeconfig.validate(text, options["context"])
        except kubeconfig.KubeconfigError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        min_s = _seconds("min-backoff", options["min_backoff"])
        max_s = _seconds("max-backoff", options["max_backoff"])
        if max_s < min_s:
            raise CommandError("max-backoff: must not be shorter than min-backoff")
        actor = _actor(options)
        with transaction.atomic():
            cluster = Cluster(
                name=name,
                context=options["context"],
                min_backoff_seconds=min_s,
                max_backoff_seconds=max_s,
                created_by=actor,
            )
            if account is not None:
                cluster.in_cluster = True
            else:
                cluster.kubeconfig = text
            cluster.save()
            where = f", context {cluster.context}" if cluster.context else ""
            if account is not None:
                where = f", in-cluster as ServiceAccount of namespace {account.namespace() or '?'}"
            events.record(
                "Cluster",
                name,
                "ClusterAdded",
                f"Cluster {name} added{where} (retry backoff {_span(min_s)} to {_span(max_s)})",
                actor=actor,
            )
        self.stdout.write(f"Cluster {name} added; the worker connects to it within seconds.")

    def _read(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not text"
            raise CommandError(f"kubeconfig: cannot read {path}: {reason}") from None

    # -- list, check -----------------------------------------------------------------------------
    def do_list(self, options: dict[str, Any]) -> None:
        rows = [("NAME", "STATE", "LAST SYNC", "API VERSIONS", "MISSING PERMISSIONS")]
        for c in Cluster.objects.all():
            synced = c.last_sync.strftime("%Y-%m-%d %H:%M:%S") if c.last_sync else "never"
            rows.append(
                (
                    c.name,
                    c.state,
                    synced,
                    ",".join(c.api_versions) or "-",
                    str(len(c.missing_permissions)) if c.missing_permissions else "none",
                )
            )
        if len(rows) == 1:
            self.stdout.write("No clusters (add one with `manage.py cluster add`).")
            return
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))

    def do_check(self, options: dict[str, Any]) -> None:
        cluster = self._cluster(options["name"])
        try:
            api = ClusterApi(kubeconfig.api_client_for(cluster))
        except kubeconfig.KubeconfigError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        result = check(api)
        cluster.state, cluster.last_error = result.state, result.error
        cluster.api_versions = result.api_versions
        cluster.missing_permissions = result.missing_permissions
        cluster.checked_at = timezone.now()
        cluster.save(
            update_fields=[
                "state",
                "last_error",
                "api_versions",
                "missing_permissions",
                "checked_at",
            ]
        )
        self.stdout.write(f"Cluster {cluster.name}: {result.state}")
        if result.error:
            self.stdout.write(f"  error: {result.error}")
        self.stdout.write(f"  API versions: {', '.join(result.api_versions) or 'none found'}")
        if result.missing_permissions:
            self.stdout.write("  missing permissions (see docs/rbac/issuance-console.yaml):")
            for missing in result.missing_permissions:
                self.stdout.write(f"    {missing}")
        elif result.error == "":
            self.stdout.write("  missing permissions: none")

    # -- remove ----------------------------------------------------------------------------------
    def do_remove(self, options: dict[str, Any]) -> None:
        cluster = self._cluster(options["name"])
        with transaction.atomic():
            mirrored, pk = cluster.resources.count(), cluster.pk
            cluster.delete()
            events.record(
                "Cluster",
                cluster.name,
                "ClusterRemoved",
                f"Cluster {cluster.name} removed ({mirrored} mirrored objects forgotten)",
                actor=_actor(options),
            )
        kubeconfig.forget(pk)
        self.stdout.write(f"Cluster {cluster.name} removed.")

    def _cluster(self, name: str) -> Cluster:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise CommandError(f"name: no cluster named {name!r}")
        return cluster
