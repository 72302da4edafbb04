"""The documentation's screenshots (tests/screenshots.py): every console page at 1280x800 and
390x844, light and dark, taken from the seeded console of the accessibility sweep by a
server without a worker, so the pages hold still.

Each is what a person sees in the window (not the full page), at device scale 1, made an
8-bit palette PNG (the 256 commonest colours, the rest drawn in the nearest of them) in a
blank page of the same browser, so the 172 pictures stay small (about 40 % of the bytes of
the browser's own PNGs) without an image library.
By default they are written to artifacts/docs-screenshots/, so a run of the suite leaves the
working tree alone (countdowns and dates differ from run to run); with DOCS_SCREENSHOTS=1
(`make docs-screenshots`) they replace the files in docs/images/screenshots/ and the
gallery page is written again (development.md says when)."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.pages import login
from tests.screenshots import (
    GALLERY,
    GALLERY_PAGE,
    SHOTS,
    Shot,
    gallery_markdown,
    palette_png,
    png_size,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

# Screenshots larger than this make the repository and the site heavy.
MAX_BYTES = 120_000

# A screenshot (base64 PNG) → its size, palette and one palette index per pixel (base64).
_TO_PALETTE = """async (png) => {
  const img = new Image();
  img.src = "data:image/png;base64," + png;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.width;
  canvas.height = img.height;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, img.width, img.height).data;
  const n = img.width * img.height;
  const pixels = new Uint32Array(n);
  const counts = new Map();
  for (let i = 0; i < n; i++) {
    const v = (data[4 * i] << 16) | (data[4 * i + 1] << 8) | data[4 * i + 2];
    pixels[i] = v;
    counts.set(v, (counts.get(v) || 0) + 1);
  }
  const palette = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 256).map((e) => e[0]);
  const slot = new Map(palette.map((v, i) => [v, i]));
  const nearest = (v) => {
    let best = 0, bestDistance = Infinity;
    palette.forEach((p, i) => {
      const dr = (p >> 16) - (v >> 16), dg = ((p >> 8) & 255) - ((v >> 8) & 255);
      const db = (p & 255) - (v & 255);
      const d = 3 * dr * dr + 4 * dg * dg + 2 * db * db;
      if (d < bestDistance) { bestDistance = d; best = i; }
    });
    return best;
  };
  const index = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    let k = slot.get(pixels[i]);
    if (k === undefined) { k = nearest(pixels[i]); slot.set(pixels[i], k); }
    index[i] = k;
  }
  let text = "";
  for (let i = 0; i < n; i += 0x8000) {
    text += String.fromCharCode.apply(null, index.subarray(i, i + 0x8000));
  }
  return {width: img.width, height: img.height, palette, index: btoa(text)};
}"""


def _target(shot: Shot) -> Path:
    if os.environ.get("DOCS_SCREENSHOTS") == "1":
        return shot.file
    return ARTIFACTS / "docs-screenshots" / f"{shot.name}.png"


def _small_png(converter: Any, screenshot: bytes) -> bytes:
    found = converter.evaluate(_TO_PALETTE, base64.b64encode(screenshot).decode())
    return palette_png(
        found["width"], found["height"], found["palette"], base64.b64decode(found["index"])
    )


def test_documentation_screenshots(
    new_page: Callable[..., Any], quiet_server: str, seeded: None
) -> None:
    converter = new_page(base_url=quiet_server)
    converter.set_content("<!DOCTYPE html><title>palette</title>")
    signed_out = new_page(base_url=quiet_server)
    signed_in = new_page(base_url=quiet_server)
    login(signed_in, "admin")
    total = 0
    for page_spec in GALLERY:
        page = signed_in if page_spec.signed_in else signed_out
        response = page.goto(page_spec.path + page_spec.anchor)
        assert response is not None and response.status == 200, page_spec.path
        if page_spec.ready:
            page.wait_for_selector(page_spec.ready)
        page.wait_for_load_state("networkidle")
        for shot in (s for s in SHOTS if s.page == page_spec):
            width, height = shot.size
            page.set_viewport_size({"width": width, "height": height})
            page.emulate_media(color_scheme=shot.scheme)
            data = _small_png(converter, page.screenshot(full_page=False, animations="disabled"))
            assert png_size(data) == shot.size, f"{shot.name}: {png_size(data)} != {shot.size}"
            assert len(data) < MAX_BYTES, f"{shot.name}: {len(data)} bytes"
            target = _target(shot)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            total += len(data)
        page.emulate_media(color_scheme="light")
    print(f"{len(SHOTS)} screenshots, {total} bytes")
    if os.environ.get("DOCS_SCREENSHOTS") == "1":
        GALLERY_PAGE.write_text(gallery_markdown(), encoding="utf-8")
