"""Accessibility checks and screenshots for browser tests (issue 14, items 7 and 8).

- `assert_accessible(page)`: axe-core (npm, `make node-deps`) finds no moderate, serious or
  critical violation on the page as it is now (its viewport, its emulated colour scheme).
- `screenshots(page, name)`: PNGs at 1280x800 and 390x844 under artifacts/screenshots/.
- `assert_no_horizontal_overflow(page)`: at the current width nothing makes the page scroll
  sideways, and every table sits in a box that scrolls by itself.

The page is a Playwright sync `Page`; typed as Any like the rest of tests/browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# What fails a test (issue 21: moderate findings too); minor ones are returned by
# axe_violations for reports.
FAILING_IMPACTS = frozenset({"moderate", "serious", "critical"})

# The axe rules whose outcome depends on how the page is rendered (its colours, what wraps,
# what scrolls): the rest read only the DOM, which neither the viewport's size nor the
# colour scheme changes (the stylesheet's media queries change colours and layout, and hide
# nothing), so a sweep can run those once per page and these at every size and scheme.
RENDERING_RULES = ("color-contrast", "link-in-text-block", "scrollable-region-focusable")

# Runs inside the page: axe's result trimmed to what a report needs.
_RUN_AXE = """async ([exclude, rules]) => {
  const context = exclude.length ? {exclude: exclude.map((s) => [s])} : document;
  const options = {resultTypes: ["violations"]};
  if (rules.length) options.runOnly = {type: "rule", values: rules};
  const result = await axe.run(context, options);
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary || ""})),
  }));
}"""


def _inject_axe(page: Any) -> None:
    if not AXE_JS.exists():
        pytest.fail(f"{AXE_JS.relative_to(ROOT)} is missing: run `make node-deps` (npm ci)")
    # Once per document: a navigation or reload drops it.
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through DevTools, not added as a <script> element: the console's
        # Content-Security-Policy (script-src 'self') blocks inline script elements, and the
        # pages are checked under that header, as users get them.
        page.evaluate(AXE_JS.read_text())


def axe_violations(
    page: Any, *, exclude: Iterable[str] = (), rules: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Every axe violation on the page (all impacts), each with id, impact, help, nodes;
    of every rule axe runs by default, or of `rules` only."""
    _inject_axe(page)
    return list(page.evaluate(_RUN_AXE, [list(exclude), list(rules)]))


def format_violations(violations: Iterable[dict[str, Any]]) -> str:
    lines = []
    for v in violations:
        lines.append(f"[{v['impact']}] {v['id']}: {v['help']} ({v['helpUrl']})")
        for node in v["nodes"][:5]:
            summary = " ".join(str(node["summary"]).split())
            lines.append(f"    {node['target']}: {summary[:300]}")
        if len(v["nodes"]) > 5:
            lines.append(f"    ... and {len(v['nodes']) - 5} more elements")
    return "\n".join(lines)


def assert_accessible(page: Any, *, exclude: Iterable[str] = ()) -> None:
    """No moderate, serious or critical axe-core violation on the page as it stands.

    `exclude`: CSS selectors of parts axe should not look at (say, a third party's widget).
    """
    failing = [v for v in axe_violations(page, exclude=exclude) if v["impact"] in FAILING_IMPACTS]
    assert not failing, (
        f"axe-core: {len(failing)} moderate/serious/critical violation(s) on {page.url} "
        f"({_viewport_label(page)}, {_scheme(page)}):\n{format_violations(failing)}"
    )


# Elements wider than the viewport, outside any box that scrolls sideways (the culprits of
# a page that scrolls horizontally), and tables not inside such a box.
_OVERFLOW = """() => {
  const width = window.innerWidth;
  // Inside a box that scrolls sideways (or, for `clips`, also one that cuts it off).
  const within = (el, kinds) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (kinds.includes(getComputedStyle(p).overflowX)) return true;
    }
    return false;
  };
  const scrolls = (el) => within(el, ["auto", "scroll"]);
  const clips = (el) => within(el, ["auto", "scroll", "hidden", "clip"]);
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.classList.length ? "." + [...el.classList].join(".") : "");
  const wide = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if ((r.right > width + 1 || r.left < -1) && !clips(el)) wide.push(name(el));
  }
  const tables = [...document.querySelectorAll("table")].filter((t) => !scrolls(t)).map(name);
  return {scrollWidth: document.documentElement.scrollWidth, width, wide: wide.slice(0, 10),
    tables};
}"""


def assert_no_horizontal_overflow(page: Any) -> None:
    """The page does not scroll sideways at its current width, and every table is inside a
    box that scrolls (so a wide table scrolls there, not the page)."""
    found = page.evaluate(_OVERFLOW)
    assert found["scrollWidth"] <= found["width"], (
        f"{page.url} scrolls sideways at {found['width']}px "
        f"(scrollWidth {found['scrollWidth']}); too wide: {found['wide']}"
    )
    assert not found["tables"], f"{page.url}: tables outside a scroll box: {found['tables']}"


@contextmanager
def viewport(page: Any, size: dict[str, int]) -> Iterator[None]:
    """The page at `size` for the block, then back to its previous size."""
    before = page.viewport_size
    page.set_viewport_size(size)
    try:
        yield
    finally:
        if before:
            page.set_viewport_size(before)


def shoot(page: Any, name: str, label: str) -> Path:
    """A full-page PNG of the page at its current size: artifacts/screenshots/<name>-<label>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}-{label}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def screenshots(page: Any, name: str) -> tuple[Path, Path]:
    """Full-page PNGs at 1280x800 and at 390x844 (a phone; device scale is the context's,
    1 by default): artifacts/screenshots/<name>-desktop.png and <name>-phone.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    paths = []
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        path = SCREENSHOTS / f"{name}-{label}.png"
        with viewport(page, size):
            page.screenshot(path=str(path), full_page=True)
        paths.append(path)
    return paths[0], paths[1]


def _viewport_label(page: Any) -> str:
    size = page.viewport_size or {}
    return f"{size.get('width')}x{size.get('height')}"


def _scheme(page: Any) -> str:
    dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    return "dark" if dark else "light"


def check_page(page: Any, name: str) -> None:
    """What every page of a flow is held to: no moderate, serious or critical axe violation in
    light and dark, no sideways scrolling on a phone, and screenshots at both sizes."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert_accessible(page)
    page.emulate_media(color_scheme="light")
    with viewport(page, PHONE):
        assert_no_horizontal_overflow(page)
    screenshots(page, name)
