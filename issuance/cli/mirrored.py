"""`certctl` for mirrored cert-manager objects, addressed as CLUSTER/NAMESPACE/NAME
(CLUSTER/NAME for cluster-scoped ones, e.g. a ClusterIssuer).

Who acts: `--as USER` names a console user, whose role and scope are checked exactly as the
API checks them (a scoped operator renews inside their scope only). Without `--as`, the
person at the shell (who holds the console's database and key anyway) acts as an admin,
recorded as `cli:<login>`, as the CLI's other verbs record them.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from issuance.models import ClusterAction, ClusterActionState, ClusterResource
from issuance.timing.durations import format_relative


@dataclass
class ShellUser:
    """The CLI's own actor: an admin named `cli:<login>` (never stored)."""

    username: str
    is_authenticated: bool = True
    is_superuser: bool = True
    is_active: bool = True
    pk: None = None

    def get_username(self) -> str:
        return self.username


def is_path(text: str) -> bool:
    return "/" in text


def parse(text: str) -> tuple[str, str, str]:
    """(cluster, namespace, name); namespace "" for CLUSTER/NAME."""
    parts = text.split("/")
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    if len(parts) == 2 and all(parts):
        return parts[0], "", parts[1]
    raise CommandError(f"{text!r}: address a mirrored object as CLUSTER/NAMESPACE/NAME")


def acting_user(as_user: str | None) -> Any:
    if not as_user:
        return ShellUser(f"cli:{getpass.getuser()}")
    found = get_user_model().objects.filter(username=as_user, is_active=True).first()
    if found is None:
        raise CommandError(f"--as {as_user}: no active console user of that name")
    return found


def find(text: str, *kinds: str) -> ClusterResource:
    """The mirrored object at `text`, of the first of `kinds` found there."""
    cluster, namespace, name = parse(text)
    rows = {
        r.kind: r
        for r in ClusterResource.objects.select_related("cluster").filter(
            cluster__name=cluster, namespace=namespace, name=name, kind__in=kinds
        )
    }
    for kind in kinds:
        if kind in rows:
            return rows[kind]
    raise CommandError(f"no {' or '.join(kinds)} {text} in the mirror")


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    relative = format_relative((value - timezone.now()).total_seconds())
    return f"{value.isoformat(timespec='seconds')} ({relative})"


def _conditions(row: ClusterResource) -> list[str]:
    lines = []
    for cond in row.conditions:
        text = f"  {cond.get('type')}={cond.get('status')}"
        if cond.get("reason"):
            text += f" reason={cond['reason']}"
        if cond.get("message"):
            text += f" message={cond['message']!r}"
        lines.append(text)
    return lines or ["  (none)"]


def status(row: ClusterResource, events: int = 10) -> str:
    where = f"{row.cluster.name}/{row.namespace + '/' if row.namespace else ''}{row.name}"
    lines = [
        f"{row.kind}: {where} (cluster {row.cluster.name}, uid {row.uid})",
        f"Ready:       {row.ready or '-'}" + (f" ({row.reason})" if row.reason else ""),
    ]
    if row.state:
        lines.append(f"State:       {row.state}")
    if row.issuer_name:
        lines.append(f"Issuer:      {row.issuer_name} ({row.issuer_kind or 'Issuer'})")
    if row.owner_name:
        lines.append(f"Owner:       {row.owner_kind}/{row.owner_name}")
    lines += ["Conditions:", *_conditions(row)]
    if row.kind == "Certificate":
        lines += [f"Not after:   {_when(row.not_after)}", f"Renewal:     {_when(row.renewal_time)}"]
        if row.last_failure_time:
            lines += [
                f"Failed issuance attempts: {row.failed_attempts}",
                f"Last failure: {_when(row.last_failure_time)}",
                f"Next retry:   {_when(row.next_retry_at)} (computed as cert-manager does)",
            ]
    queued = ClusterAction.objects.filter(cluster_id=row.cluster_id, uid=row.uid).order_by(
        "-created_at"
    )[:5]
    if queued:
        lines += ["", "Actions (newest first):"]
        for act in queued:
            said = f" ({act.last_error})" if act.last_error else ""
            lines.append(
                f"  {act.created_at.isoformat(timespec='seconds')} {act.action} by {act.actor}: "
                f"{act.state}{said} [{act.id}]"
            )
    recent = row.kube_events()[:events]
    if recent:
        lines += ["", "Events (newest first):"]
        for ev in recent:
            lines.append(
                f"  {ev.last_seen.isoformat(timespec='seconds')} {ev.type:<7} {ev.reason}"
                f" ({ev.source or '-'}, x{ev.count}): {ev.message}"
            )
    return "\n".join(lines)


def queued_line(action: ClusterAction, cluster: str) -> str:
    where = f"{cluster}/{action.namespace}/{action.name}"
    state = "queued" if action.state == ClusterActionState.PENDING else action.state.lower()
    verb = {"renew": "Renewal", "approve": "Approval", "deny": "Denial"}[action.action]
    return (
        f"{verb} of {action.kind} {where} {state} (action {action.id}); the worker writes it "
        "to the cluster"
    )
