"""Audit log: every timeline entry (Event) across resources, filtered by actor, resource
kind, reason and time range, newest first, and the same selection as a streamed CSV.

Paging is keyset (seek) on (created_at, id), not LIMIT/OFFSET: the table grows by ~18 rows
per issuance, an OFFSET deep into it reads and throws away every row before the page, and
a COUNT(*) of a filtered selection per page costs as much as the deepest page. A page is
one query of PAGE_SIZE + 1 rows (the extra row says whether there is an older page), at
any depth; the pager offers newer/older instead of page numbers.

Who may read it: the viewer role, like every certificate page, whose timeline shows the
same entries with the same actors; entries never carry secrets (see issuance/observability/events.py).
"""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse

from console.web.access import permission_required, render_page
from issuance.models import Event

PAGE_SIZE = 50
EXPORT_CHUNK = 1000
# The kinds events.record is called with (issuance/observability/events.py callers).
KINDS = (
    "Certificate",
    "CertificateRequest",
    "Order",
    "Challenge",
    "Issuer",
    "Revocation",
    "BootstrapToken",
    "NotificationChannel",
    "NotificationRule",
    "SignIn",  # issuance/access/signin.py: sign-ins, failures, locks, lifts
)
DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CSV_COLUMNS = (
    "time",
    "type",
    "kind",
    "name",
    "certificate",
    "reason",
    "actor",
    "message",
    "url",
)
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150)
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *((k, k) for k in KINDS)])
    reason = forms.CharField(required=False, max_length=128)
    since = forms.DateTimeField(required=False, input_formats=DATETIME_FORMATS, label="From")
    until = forms.DateTimeField(required=False, input_formats=DATETIME_FORMATS, label="To")


def filtered(form: AuditFilterForm) -> QuerySet[Event]:
    """The selection, unordered; an invalid filter form selects nothing (and says why)."""
    qs = Event.objects.all()
    if not form.is_valid():
        return qs.none()
    data = form.cleaned_data
    if data["actor"]:
        qs = qs.filter(actor=data["actor"].strip())
    if data["kind"]:
        qs = qs.filter(kind=data["kind"])
    if data["reason"]:
        qs = qs.filter(reason=data["reason"].strip())
    if data["since"]:
        qs = qs.filter(created_at__gte=data["since"])
    if data["until"]:
        qs = qs.filter(created_at__lt=data["until"])
    return qs


# -- keyset cursors: "<microseconds since the epoch>.<id>" --------------------------------


def cursor_of(event: Event) -> str:
    return f"{(event.created_at - EPOCH) // timedelta(microseconds=1)}.{event.pk}"


def parse_cursor(value: str | None) -> tuple[datetime, int] | None:
    if not value:
        return None
    micros, _, pk = value.partition(".")
    try:
        return EPOCH + timedelta(microseconds=int(micros)), int(pk)
    except (ValueError, OverflowError):
        return None


# The outer created_at bound is implied by the OR; written out, PostgreSQL uses it as an
# index range condition rather than filtering every row before the cursor.
def older_than(at: datetime, pk: int) -> Q:
    return Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(created_at=at, id__lt=pk))


def newer_than(at: datetime, pk: int) -> Q:
    return Q(created_at__gte=at) & (Q(created_at__gt=at) | Q(created_at=at, id__gt=pk))


@dataclass(frozen=True)
class AuditPage:
    events: list[Event]
    older: str | None  # cursor for the next (older) page
    newer: str | None  # cursor for the previous (newer) page


def page_of(qs: QuerySet[Event], before: str | None, after: str | None) -> AuditPage:
    """One query, at any depth."""
    newer_cursor = parse_cursor(after)
    older_cursor = parse_cursor(before)
    if newer_cursor is not None:
        rows = list(
            qs.filter(newer_than(*newer_cursor)).order_by("created_at", "id")[: PAGE_SIZE + 1]
        )
        more = len(rows) > PAGE_SIZE
        events = list(reversed(rows[:PAGE_SIZE]))
        return AuditPage(
            events,
            older=cursor_of(events[-1]) if events else None,
            newer=cursor_of(events[0]) if more else None,
        )
    if older_cursor is not None:
        qs = qs.filter(older_than(*older_cursor))
    rows = list(qs.order_by("-created_at", "-id")[: PAGE_SIZE + 1])
    events = rows[:PAGE_SIZE]
    return AuditPage(
        events,
        older=cursor_of(events[-1]) if len(rows) > PAGE_SIZE else None,
        # Came here from a newer page: it is still there (or newer entries arrived).
        newer=cursor_of(events[0]) if older_cursor is not None and events else None,
    )


def resource_url(kind: str, name: str, certificate_name: str) -> str | None:
    """The page of an entry's resource. Requests, orders and challenges of a certificate are
    shown in its chain on the certificate's page; without one, their list pages."""
    if kind == "Certificate":
        return reverse("web:certificate-detail", args=[name])
    if kind in ("CertificateRequest", "Order", "Challenge", "Revocation") and certificate_name:
        return reverse("web:certificate-detail", args=[certificate_name])
    if kind == "Issuer":
        return reverse("web:issuer-policy", args=[name])
    lists = {
        "CertificateRequest": "web:requests",
        "Order": "web:orders",
        "Challenge": "web:challenges",
    }
    return reverse(lists[kind]) if kind in lists else None


def _local_input(form: AuditFilterForm, name: str) -> str:
    """A datetime-local input's value (it shows nothing for "2026-03-01", which we accept)."""
    if form.is_valid() and form.cleaned_data[name]:
        when: datetime = form.cleaned_data[name].astimezone(UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%S" if when.second else "%Y-%m-%dT%H:%M")
    return str(form.data.get(name) or "")


@permission_required("event", "read")
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    page = page_of(filtered(form), request.GET.get("before"), request.GET.get("after"))
    rows = [(ev, resource_url(ev.kind, ev.name, ev.certificate_name)) for ev in page.events]
    params = request.GET.copy()
    for key in ("before", "after"):
        params.pop(key, None)
    return render_page(
        request,
        "console/audit.html",
        {
            "form": form,
            "page": page,
            "rows": rows,
            "filter_query": params.urlencode(),
            "kinds": KINDS,
            "since_value": _local_input(form, "since"),
            "until_value": _local_input(form, "until"),
        },
    )


# -- CSV export ---------------------------------------------------------------------------


def csv_cell(value: str) -> str:
    return "'" + value if value.startswith(FORMULA_STARTS) else value


class _Line:
    """csv.writer writes into this; each row becomes one chunk of the response."""

    def write(self, value: str) -> str:
        return value


def _chunk(qs: QuerySet[Event], after: tuple[datetime, int] | None) -> list[Event]:
    if after is not None:
        qs = qs.filter(older_than(*after))
    fields = (
        "created_at",
        "type",
        "kind",
        "name",
        "certificate_name",
        "reason",
        "actor",
        "message",
    )
    return list(qs.only(*fields).order_by("-created_at", "-id")[:EXPORT_CHUNK])


def _lines(events: list[Event], base: str) -> list[str]:
    writer = csv.writer(_Line())
    out = []
    for ev in events:
        url = resource_url(ev.kind, ev.name, ev.certificate_name)
        cells = [
            ev.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            ev.type,
            ev.kind,
            ev.name,
            ev.certificate_name,
            ev.reason,
            ev.actor,
            ev.message,
            base + url if url else "",
        ]
        out.append(writer.writerow([csv_cell(c) for c in cells]))
    return out


def _header() -> str:
    return str(csv.writer(_Line()).writerow(CSV_COLUMNS))


def _next(events: list[Event]) -> tuple[datetime, int] | None:
    return (events[-1].created_at, events[-1].pk) if len(events) == EXPORT_CHUNK else None


def export_rows(qs: QuerySet[Event], base: str) -> Iterator[str]:
    """Chunks of EXPORT_CHUNK rows, each its own keyset query, so a large export neither
    holds a cursor open for the whole download nor builds the file in memory."""
    yield _header()
    cursor: tuple[datetime, int] | None = None
    while True:
        events = _chunk(qs, cursor)
        yield from _lines(events, base)
        cursor = _next(events)
        if cursor is None:
            return


async def export_rows_async(qs: QuerySet[Event], base: str) -> AsyncIterator[str]:
    """The same for ASGI (`manage.py serve`), where Django would read a synchronous
    iterator to the end before sending anything."""
    yield _header()
    cursor: tuple[datetime, int] | None = None
    fetch = sync_to_async(_chunk)
    while True:
        events = await fetch(qs, cursor)
        for line in _lines(events, base):
            yield line
        cursor = _next(events)
        if cursor is None:
            return


@permission_required("event", "read")
def audit_export(request: HttpRequest) -> HttpResponseBase:
    """The selection as CSV (the same rule as the page)."""
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return HttpResponse(
            "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    qs = filtered(form)
    base = request.build_absolute_uri("/").rstrip("/")
    content: Any = (
        export_rows_async(qs, base) if isinstance(request, ASGIRequest) else export_rows(qs, base)
    )
    response = StreamingHttpResponse(content, content_type="text/csv; charset=utf-8")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
