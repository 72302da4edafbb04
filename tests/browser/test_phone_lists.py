"""Lists on a phone (issue 25, item 2): on every page of the seeded console (long real names,
every state) at 390x844, light and dark, every table is readable without squeezed words.

For each cell of each list, every word (a run of letters and digits) sits on one line: a
table squeezed to the screen broke "certificate" into "certificat e" and "KeyPairVerified"
into "KeyPai rVerifi ed". The state (status, ready, result) cell of each row is on the
screen without scrolling sideways, nothing makes the page itself wider than the screen, and
each cell carries its column's name (data-label), which the phone layout shows beside it.
At 1280x800 the lists are still tables (the desktop layout is unchanged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.a11y import DESKTOP, PHONE
from tests.browser.pages import login
from tests.browser.seeded_console import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

# The lists the issue names, which must be among the pages checked with rows in them.
LIST_PAGES = {
    "dashboard",
    "certificates",
    "requests",
    "issuers",
    "orders",
    "challenges",
    "audit",
    "users",
    "signin-locks",
    "oidc-rules",
    "tokens",
    "webhooks",
    "notifications",
    "clusters",
    "cluster-detail",
    "certificate-downloads",
    "mirrored-certificate-failing",
    "bulk-finished",
}
# The approval queue is a list of cards already (no table).
NO_TABLE = {"requests"}

STATE_HEADERS = ("state", "status", "ready", "result")

# Every word of every body cell of every table in <main>, its lines, the state cells'
# boxes, and each cell's data-label against its column's header.
_READ_LISTS = """(stateHeaders) => {
  const width = document.documentElement.clientWidth;
  const words = /[\\p{L}\\p{N}]+/gu;
  const broken = [], hidden = [], unlabelled = [];
  let rows = 0;
  const clipper = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return p;
    }
    return null;
  };
  const lines = (node, start, end) => {
    const range = document.createRange();
    range.setStart(node, start);
    range.setEnd(node, end);
    const tops = new Set();
    for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
    return tops.size;
  };
  document.querySelectorAll("main details").forEach((d) => { d.open = true; });
  for (const table of document.querySelectorAll("main table")) {
    const headers = [...table.querySelectorAll(":scope > thead > tr > th")].map(
      (th) => th.textContent.trim().replace(/\\s+/g, " "));
    for (const tr of table.querySelectorAll(":scope > tbody > tr")) {
      const cells = [...tr.children];
      if (cells.length !== headers.length) continue;  // "nothing here yet" rows
      rows += 1;
      cells.forEach((cell, i) => {
        const where = `${headers[i] || "(no header)"}: ${cell.textContent.trim().slice(0, 60)}`;
        if (headers[i] && !cell.querySelector("input[type=checkbox][data-select-row]") &&
            cell.dataset.label !== headers[i]) {
          unlabelled.push(`${where} (data-label ${JSON.stringify(cell.dataset.label)})`);
        }
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const el = node.parentElement;
          if (!el.getClientRects().length || el.closest(".visually-hidden")) continue;
          for (const m of node.data.matchAll(words)) {
            if (lines(node, m.index, m.index + m[0].length) > 1) {
              broken.push(`${m[0]} in ${where}`);
            }
          }
        }
        if (stateHeaders.includes((headers[i] || "").toLowerCase())) {
          const r = cell.getBoundingClientRect();
          const box = clipper(cell);
          const right = box ? Math.min(width, box.getBoundingClientRect().right) : width;
          if (r.width === 0 || r.left < -1 || r.right > right + 1) {
            hidden.push(`${where} (${Math.round(r.left)}..${Math.round(r.right)} of ${right})`);
          }
        }
      });
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, rows,
    tables: document.querySelectorAll("main table").length,
    broken: broken.slice(0, 15), hidden: hidden.slice(0, 15),
    unlabelled: unlabelled.slice(0, 15)};
}"""


def test_every_list_readable_on_a_phone(
    new_page: Callable[..., Any], quiet_server: str, seeded: None
) -> None:
    page = new_page(base_url=quiet_server)
    login(page, "admin")
    problems: list[str] = []
    with_rows: set[str] = set()
    for name, path in PAGES:
        response = page.goto(path)
        assert response is not None and response.status == 200, f"{name}: {path}"
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.set_viewport_size(PHONE)
            found = page.evaluate(_READ_LISTS, list(STATE_HEADERS))
            where = f"{name} ({scheme}, phone)"
            if found["rows"]:
                with_rows.add(name)
            if found["scrollWidth"] > found["width"]:
                problems.append(f"{where} scrolls sideways: {found['scrollWidth']}px")
            for kind in ("broken", "hidden", "unlabelled"):
                if found[kind]:
                    problems.append(f"{where} {kind}: {found[kind]}")
        page.emulate_media(color_scheme="light")
        page.set_viewport_size(DESKTOP)
    missing = sorted(LIST_PAGES - NO_TABLE - with_rows)
    if missing:
        problems.append(f"list pages checked without rows: {missing}")
    assert not problems, "\n".join(problems)


def test_desktop_lists_stay_tables(
    new_page: Callable[..., Any], quiet_server: str, seeded: None
) -> None:
    """At 1280x800 the certificate list is a table with its header row shown; at 390x844 its
    rows are cards with the header row hidden and each cell's label drawn beside it."""
    page = new_page(base_url=quiet_server)
    login(page, "admin")
    page.set_viewport_size(DESKTOP)
    page.goto("/certificates/")
    layout = """() => {
      const table = document.querySelector("table.certificates");
      const th = [...table.querySelectorAll("thead th")].find((h) => h.textContent === "State");
      const cell = table.querySelector("tbody tr td[data-label=State]");
      return {table: getComputedStyle(table).display, header: th.getBoundingClientRect().width,
        label: getComputedStyle(cell, "::before").content,
        sameRow: cell.getBoundingClientRect().top === cell.previousElementSibling.getBoundingClientRect().top};
    }"""
    desktop = page.evaluate(layout)
    assert desktop["table"] == "table" and desktop["header"] > 10, desktop
    assert desktop["label"] == "none" and desktop["sameRow"], desktop
    page.set_viewport_size(PHONE)
    phone = page.evaluate(layout)
    assert phone["table"] == "block" and phone["header"] <= 1, phone
    assert "State" in phone["label"] or "data-label" in phone["label"], phone
    assert not phone["sameRow"], phone
