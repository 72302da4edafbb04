"""The documentation shows exactly the screenshots the browser test takes: every image a
page refers to exists, and every screenshot in tests/screenshots.py is used by a page and is
a PNG of the size it was taken at; the gallery page shows the four shots of every console
page. No browser needed."""

from __future__ import annotations

import re
from pathlib import Path

from django.urls import resolve

from tests.browser.seeded_console import PAGES
from tests.screenshots import (
    DIRECTORY,
    DOCS,
    GALLERY,
    GALLERY_PAGE,
    ROOT,
    SHOTS,
    gallery_markdown,
    png_size,
)

# ![alt](path) and ![alt](path){ attrs }, the alt text possibly over several lines.
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def referenced_images() -> dict[Path, list[str]]:
    """Every image the docs pages (and the README) refer to, with where."""
    found: dict[Path, list[str]] = {}
    pages = [*DOCS.rglob("*.md"), ROOT / "README.md"]
    for page in pages:
        for target in IMAGE.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            found.setdefault(path, []).append(str(page.relative_to(ROOT)))
    return found


def test_the_reader_finds_images() -> None:
    # The checks below mean something only if the pattern sees the pages' images.
    assert (DIRECTORY / "dashboard.png").resolve() in referenced_images()


def test_every_image_the_docs_use_exists() -> None:
    missing = {str(p): pages for p, pages in referenced_images().items() if not p.is_file()}
    assert not missing, f"images referred to but missing: {missing}"


def test_every_screenshot_is_used_and_nothing_else_is_in_its_folder() -> None:
    used = referenced_images()
    unused = [shot.name for shot in SHOTS if shot.file.resolve() not in used]
    assert not unused, f"screenshots taken but not shown in the docs: {unused}"
    names = {f"{shot.name}.png" for shot in SHOTS}
    strays = sorted(p.name for p in DIRECTORY.glob("*") if p.name not in names)
    assert not strays, f"files in {DIRECTORY} that no test takes: {strays}"


def test_screenshots_are_pngs_of_their_size() -> None:
    for shot in SHOTS:
        assert png_size(shot.file.read_bytes()) == shot.size, shot.name


def test_the_gallery_page_shows_every_shot_grouped_by_page() -> None:
    # docs/console/gallery.md is written with the screenshots (make docs-screenshots).
    assert GALLERY_PAGE.read_text(encoding="utf-8") == gallery_markdown(), (
        "docs/console/gallery.md differs from tests/screenshots.gallery_markdown(): run "
        "make docs-screenshots"
    )


def test_the_gallery_has_every_console_page() -> None:
    """Every route the accessibility sweep visits (seeded_console.PAGES) has its four shots."""
    shown = {str(resolve(page.path.split("?")[0]).url_name) for page in GALLERY}
    swept = {str(resolve(path.split("?")[0]).url_name) for _, path in PAGES}
    assert not swept - shown, f"pages without screenshots: {sorted(swept - shown)}"
    assert "login" in shown
    names = [shot.name for shot in SHOTS]
    assert len(names) == len(set(names)) == 4 * len(GALLERY)
