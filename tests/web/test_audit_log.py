"""The audit log: filters, keyset paging, links to each resource, the CSV export (same
filters, escaped against CSV injection, streamed in chunks), roles and query counts."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest
from asgiref.sync import async_to_sync
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from console.web import audit
from issuance.models import Event, Issuer
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def ev(
    minute: int,
    *,
    kind: str = "Certificate",
    name: str = "web",
    reason: str = "Issued",
    actor: str = "",
    message: str = "",
    certificate_name: str | None = None,
) -> Event:
    if certificate_name is None:
        certificate_name = name if kind == "Certificate" else ""
    return Event.objects.create(
        kind=kind,
        name=name,
        reason=reason,
        actor=actor,
        message=message,
        certificate_name=certificate_name,
        created_at=T0 + timedelta(minutes=minute),
    )


def ids_on(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-event="(\d+)"', html)]


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    return found.group(1).replace("&amp;", "&") if found else None


def csv_rows(response: HttpResponseBase) -> list[list[str]]:
    assert isinstance(response, StreamingHttpResponse)  # streamed, never built in memory
    body = b"".join(bytes(chunk) for chunk in response)
    return list(csv.reader(io.StringIO(body.decode())))


@pytest.fixture
def sample() -> dict[str, Event]:
    return {
        "issued": ev(0, reason="Issued"),
        "renew": ev(1, reason="ManuallyTriggered", actor="alice"),
        "deny": ev(
            2,
            kind="CertificateRequest",
            name="node-1-csr",
            reason="Denied",
            actor="bob",
            message="not ours",
        ),
        "order": ev(3, kind="Order", name="web-1-abc", reason="Valid", certificate_name="web"),
        "challenge": ev(4, kind="Challenge", name="loose-chal", reason="Presented"),
        "issuer": ev(5, kind="Issuer", name="le", reason="SpecChanged", actor="alice"),
        "token": ev(6, kind="BootstrapToken", name="abc123", reason="Created", actor="alice"),
    }


# -- the page -----------------------------------------------------------------------------


def test_every_entry_newest_first_with_links(
    client_for: ClientFor, sample: dict[str, Event]
) -> None:
    make_selfsigned_issuer("le")
    make_certificate("web", Issuer.objects.get(name="le"))
    html = client_for("viewer").get("/audit/").content.decode()
    assert ids_on(html) == [e.pk for e in reversed(sample.values())]
    rows = dict(zip(ids_on(html), html.split('data-event="')[1:], strict=True))

    def href(key: str) -> str | None:
        found = re.search(r'<a href="([^"]+)">', rows[sample[key].pk])
        return found.group(1) if found else None

    assert href("issued") == "/certificates/web/"
    assert href("order") == "/certificates/web/"  # its certificate's page shows the chain
    assert href("challenge") == "/challenges/"  # no certificate: the list
    assert href("deny") == "/requests/"
    assert href("issuer") == "/issuers/le/policy/"
    assert href("token") is None  # no page for bootstrap tokens
    assert "alice" in rows[sample["renew"].pk] and "not ours" in rows[sample["deny"].pk]
    # every link resolves to a page
    for url in {href(k) for k in sample} - {None}:
        assert client_for("viewer").get(str(url)).status_code == 200, url


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("actor=alice", ["token", "issuer", "renew"]),
        ("actor=bob", ["deny"]),
        ("actor=nobody-at-all", []),
        ("kind=Issuer", ["issuer"]),
        ("kind=CertificateRequest", ["deny"]),
        ("reason=Denied", ["deny"]),
        ("reason=Issued&kind=Order", []),
        ("since=2026-03-01T12:02&until=2026-03-01T12:04", ["order", "deny"]),  # [from, to)
        ("since=2026-03-01T12:05", ["token", "issuer"]),
        ("until=2026-03-01T12:01", ["issued"]),
        ("actor=alice&since=2026-03-01T12:02", ["token", "issuer"]),
    ],
)
def test_filters(
    client_for: ClientFor, sample: dict[str, Event], query: str, expected: list[str]
) -> None:
    html = client_for("viewer").get(f"/audit/?{query}").content.decode()
    assert ids_on(html) == [sample[k].pk for k in expected]
    # The export link carries the same filters.
    export = re.search(r'id="audit-export" href="([^"]+)"', html)
    assert export is not None
    assert unquote(export.group(1).replace("&amp;", "&")) == f"/audit/export.csv?{query}"


def test_time_inputs_show_what_is_filtered(client_for: ClientFor) -> None:
    html = client_for("viewer").get("/audit/?since=2026-03-01&until=2026-03-02T10:00:30").content
    assert b'name="since" value="2026-03-01T00:00"' in html
    assert b'name="until" value="2026-03-02T10:00:30"' in html


def test_invalid_filters_say_why_and_select_nothing(
    client_for: ClientFor, sample: dict[str, Event]
) -> None:
    html = client_for("viewer").get("/audit/?since=yesterday&kind=Pod").content.decode()
    assert ids_on(html) == []
    assert "since: Enter a valid date/time." in html
    assert "kind: Select a valid choice." in html
    response = client_for("viewer").get("/audit/export.csv?since=yesterday")
    assert response.status_code == 400


def test_keyset_pages_walk_every_entry_once_both_ways(client_for: ClientFor) -> None:
    # 2.5 pages, with many entries sharing a timestamp (a batch): the id breaks the tie.
    events = [ev(i // 7, name=f"c{i}") for i in range(audit.PAGE_SIZE * 2 + 25)]
    newest_first = [e.pk for e in sorted(events, key=lambda e: (e.created_at, e.pk), reverse=True)]
    client = client_for("viewer")
    seen: list[int] = []
    pages: list[list[int]] = []
    url: str | None = "/audit/"
    while url:
        html = client.get(url).content.decode()
        pages.append(ids_on(html))
        seen += pages[-1]
        url = link(html, "next")
        if pages[-1] and len(pages) == 1:
            assert link(html, "prev") is None  # the first page has nothing newer
    assert [len(p) for p in pages] == [audit.PAGE_SIZE, audit.PAGE_SIZE, 25]
    assert seen == newest_first
    # Back again from the last page through "Newer".
    back: list[list[int]] = [pages[-1]]
    url = link(html, "prev")
    while url:
        html = client.get(url).content.decode()
        back.insert(0, ids_on(html))
        url = link(html, "prev")
    assert back == pages
    # Filters survive paging.
    for i in range(60):
        ev(100 + i, actor="carol", name=f"d{i}")
    html = client.get("/audit/?actor=carol").content.decode()
    older = link(html, "next")
    assert older is not None and "actor=carol" in older
    assert len(ids_on(client.get(older).content.decode())) == 10
    assert client.get("/audit/?before=junk").status_code == 200  # a bad cursor: first page


def test_hostile_text_is_escaped(client_for: ClientFor) -> None:
    ev(0, actor="<script>alert(1)</script>", message="<img src=x onerror=alert(1)>")
    html = client_for("viewer").get("/audit/").content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_roles(client_for: ClientFor) -> None:
    for url in ("/audit/", "/audit/export.csv"):
        assert client_for(None).get(url).status_code == 302, url
        assert client_for("nobody").get(url).status_code == 403, url
        assert client_for("viewer").get(url).status_code == 200, url
    assert 'href="/audit/"' in client_for("viewer").get("/").content.decode()


def test_page_queries_do_not_grow_with_events_or_depth(
    client_for: ClientFor, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    client = client_for("viewer")
    for i in range(10):
        ev(i, name=f"a{i}")
    client.get("/audit/")  # session warm-up

    def count(url: str) -> int:
        with django_assert_max_num_queries(10) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    small = count("/audit/")
    for i in range(300):
        ev(20 + i, name=f"b{i}", actor="dave" if i % 2 else "")
    html = client.get("/audit/").content.decode()
    deep = link(client.get(str(link(html, "next"))).content.decode(), "next")
    assert deep is not None
    assert count("/audit/") == small
    assert count(deep) == small
    assert count("/audit/?actor=dave&kind=Certificate&reason=Issued&since=2026-03-01") == small


# -- CSV ----------------------------------------------------------------------------------


def test_csv_has_every_field_and_the_same_filters(
    client_for: ClientFor, sample: dict[str, Event]
) -> None:
    response = client_for("viewer").get("/audit/export.csv")
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = csv_rows(response)
    assert rows[0] == list(audit.CSV_COLUMNS)
    assert len(rows) == 1 + len(sample)
    deny = next(r for r in rows if r[3] == "node-1-csr")
    assert deny == [
        "2026-03-01T12:02:00Z",
        "Normal",
        "CertificateRequest",
        "node-1-csr",
        "",
        "Denied",
        "bob",
        "not ours",
        "http://testserver/requests/",
    ]
    assert next(r for r in rows if r[2] == "BootstrapToken")[8] == ""

    filtered = csv_rows(client_for("viewer").get("/audit/export.csv?actor=alice&kind=Issuer"))
    assert [r[3] for r in filtered[1:]] == ["le"]
    ranged = csv_rows(
        client_for("viewer").get("/audit/export.csv?since=2026-03-01T12:02&until=2026-03-01T12:04")
    )
    assert [r[3] for r in ranged[1:]] == ["web-1-abc", "node-1-csr"]


def test_csv_cells_cannot_start_a_formula(client_for: ClientFor) -> None:
    ev(0, actor='=HYPERLINK("http://evil")', message="+1+1", reason="-2", name="web")
    ev(1, actor="@SUM(A1)", message='comma, "quotes"\nand a newline', name="web")
    ev(2, actor="\tTAB", message="plain = fine", name="web")
    rows = csv_rows(client_for("viewer").get("/audit/export.csv"))[1:]
    assert rows[2][5:8] == ["'-2", '\'=HYPERLINK("http://evil")', "'+1+1"]
    assert rows[1][6:8] == ["'@SUM(A1)", 'comma, "quotes"\nand a newline']
    assert rows[0][6:8] == ["'\tTAB", "plain = fine"]
    for row in rows:
        assert not any(cell[:1] in ("=", "+", "-", "@", "\t") for cell in row)


def test_csv_is_built_in_chunks_without_gaps_or_repeats(
    client_for: ClientFor,
    monkeypatch: pytest.MonkeyPatch,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    monkeypatch.setattr(audit, "EXPORT_CHUNK", 7)
    events = [ev(i // 5, name=f"c{i}") for i in range(50)]  # ties across chunk edges
    expected = [e.name for e in sorted(events, key=lambda e: (e.created_at, e.pk), reverse=True)]
    client = client_for("viewer")
    client.get("/audit/")
    with django_assert_max_num_queries(3 + 8) as ctx:  # session + user + roles, 8 chunks
        rows = csv_rows(client.get("/audit/export.csv"))
    assert [r[3] for r in rows[1:]] == expected
    assert sum("issuance_event" in q["sql"] for q in ctx.captured_queries) == 8  # 50 / 7

    # The ASGI variant (what `manage.py serve` runs) yields the same rows.
    async def collect(lines: AsyncIterator[str]) -> str:
        return "".join([line async for line in lines])

    body = async_to_sync(collect)(audit.export_rows_async(Event.objects.all(), "http://x"))
    assert [r[3] for r in csv.reader(io.StringIO(body))][1:] == expected
