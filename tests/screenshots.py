"""The screenshots the documentation shows: one list, read by the browser test that takes
them (tests/browser/test_screenshots.py) and by the fast test that checks the docs use
exactly these (tests/test_docs_images.py).

Every console page (GALLERY: every route of tests/browser/seeded_console.PAGES, the detail
pages of the seeded objects included, and the sign-in page) is taken four times, at
1280x800 and 390x844, light and dark; docs/console/gallery.md shows them grouped by page
(`gallery_markdown()` writes it) and other pages pick single shots from them."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from tests.browser.seeded_console import (
    FINISHED_BULK,
    LONG_CERTIFICATE,
    LONG_CLUSTER,
    LONG_ISSUER,
    LONG_NAMESPACE,
)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DIRECTORY = DOCS / "images" / "screenshots"
GALLERY_PAGE = DOCS / "console" / "gallery.md"

DESKTOP = (1280, 800)
PHONE = (390, 844)

_MIRRORED = f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}"


@dataclass(frozen=True)
class Page:
    name: str  # the shots' names start with it
    title: str  # the gallery's heading
    path: str  # on the seeded console (tests/browser/seeded_console.py)
    signed_in: bool = True
    ready: str = ""  # a selector to wait for: a page its script renders after loading
    anchor: str = ""  # "#id": the window scrolled to that part of the page


# One entry per console page an admin reaches (test_docs_images.py checks that every route
# of seeded_console.PAGES is here), in the order of the navigation.
GALLERY: tuple[Page, ...] = (
    Page("login", "Sign in", "/login/", signed_in=False),
    Page("dashboard", "Dashboard", "/"),
    Page("certificates", "Certificates", "/certificates/"),
    Page("certificate-detail", "A certificate", "/certificates/shop-expiring/"),
    Page(
        "certificate-long-name",
        "A certificate with a long name",
        f"/certificates/{LONG_CERTIFICATE}/",
    ),
    # The Endpoints card (docs/verifying-deployments.md): a certificate whose endpoints
    # serve the current revision, an older one, nothing (refused) and are not probed yet.
    Page(
        "certificate-endpoints",
        "A certificate's endpoints",
        "/certificates/web/",
        anchor="#certificate-endpoints",
    ),
    Page("certificate-new", "New certificate", "/new-certificate/"),
    Page("certificate-edit", "Edit a certificate", "/certificates/web/edit/"),
    Page("certificate-clone", "Clone a certificate", "/certificates/web/clone/"),
    Page("certificate-delete", "Delete a certificate", "/certificates/web/delete/"),
    Page("certificate-revoke", "Revoke a certificate", "/certificates/web/revoke/"),
    Page("certificate-downloads", "Download tokens", "/certificates/web/downloads/"),
    Page("certificate-key-files", "Private key and PKCS#12", "/certificates/web/files/key/"),
    Page("bulk", "A bulk action's results", f"/bulk/{FINISHED_BULK}/"),
    Page("requests", "Approval queue", "/requests/"),
    Page("issuers", "Issuers", "/issuers/"),
    Page("issuer-new", "New issuer", "/new-issuer/"),
    Page("issuer-edit", "Edit an issuer", f"/issuers/{LONG_ISSUER}/edit/"),
    Page("issuer-delete", "Delete an issuer", "/issuers/letsencrypt-staging/delete/"),
    Page("issuer-policy", "Approval policy", "/issuers/manual-approval/policy/"),
    Page("orders", "Orders", "/orders/"),
    Page("challenges", "Challenges", "/challenges/"),
    Page("audit", "Audit log", "/audit/"),
    Page("users", "Users", "/users/"),
    Page("signin-locks", "Sign-in locks", "/users/locks/"),
    Page("oidc-rules", "Single sign-on", "/users/sso/"),
    Page("tokens", "API tokens", "/account/tokens/"),
    Page("account-security", "Account security", "/account/security/"),
    Page("password-change", "Change password", "/account/password/"),
    Page("webhooks", "Webhooks", "/webhooks/"),
    Page("notifications", "Notifications", "/notifications/"),
    Page("notification-channel-edit", "Edit a channel", "/notifications/channels/ops-chat/edit/"),
    Page("clusters", "Clusters", "/clusters/"),
    Page("cluster-add", "Add a cluster", "/new-cluster/"),
    Page("cluster-detail", "A cluster", f"/clusters/{LONG_CLUSTER}/"),
    Page("cluster-edit", "Edit a cluster", f"/clusters/{LONG_CLUSTER}/edit/"),
    Page("cluster-delete", "Delete a cluster", f"/clusters/{LONG_CLUSTER}/delete/"),
    Page(
        "mirrored-certificate",
        "A mirrored Certificate",
        f"{_MIRRORED}/certificates/api-gateway/",
    ),
    Page(
        "mirrored-request",
        "A mirrored CertificateRequest",
        f"{_MIRRORED}/certificaterequests/api-gateway-7/",
    ),
    Page("mirrored-order", "A mirrored Order", f"{_MIRRORED}/orders/api-gateway-7-1453/"),
    Page(
        "mirrored-challenge",
        "A mirrored Challenge",
        f"{_MIRRORED}/challenges/api-gateway-7-1453-99/",
    ),
    Page("mirrored-issuer", "A mirrored Issuer", f"{_MIRRORED}/issuers/team-ca/"),
    Page(
        "mirrored-clusterissuer",
        "A mirrored ClusterIssuer",
        f"/clusters/{LONG_CLUSTER}/clusterissuers/letsencrypt/",
    ),
    Page("api-docs", "API reference", "/api/docs/", ready="#operations-tag-certificates"),
)


@dataclass(frozen=True)
class Shot:
    name: str  # docs/images/screenshots/<name>.png
    page: Page
    size: tuple[int, int] = DESKTOP
    scheme: str = "light"

    @property
    def path(self) -> str:
        return self.page.path

    @property
    def file(self) -> Path:
        return DIRECTORY / f"{self.name}.png"

    @property
    def label(self) -> str:
        return f"{'phone' if self.size == PHONE else 'desktop'}, {self.scheme}"


def _variants(page: Page) -> tuple[Shot, ...]:
    # "dashboard", "dashboard-dark", "dashboard-phone", "dashboard-phone-dark"
    return tuple(
        Shot(f"{page.name}{suffix}", page, size, scheme)
        for suffix, size, scheme in (
            ("", DESKTOP, "light"),
            ("-dark", DESKTOP, "dark"),
            ("-phone", PHONE, "light"),
            ("-phone-dark", PHONE, "dark"),
        )
    )


SHOTS: tuple[Shot, ...] = tuple(shot for page in GALLERY for shot in _variants(page))


def gallery_markdown() -> str:
    """docs/console/gallery.md: the four shots of every page, page by page."""
    out = [
        "# Gallery",
        "",
        "Every page of the console, on the seeded console of the browser tests (long names,",
        "every state), at 1280×800 and on a 390×844 phone, in light and dark. The pictures",
        "are taken by `tests/browser/test_screenshots.py`; `make docs-screenshots` takes them",
        "again and writes this page ([Testing](../development.md#the-documentation) says when).",
        "",
    ]
    for page in GALLERY:
        out += [f"## {page.title}", "", f"`{page.path}`", ""]
        for shot in _variants(page):
            width = 180 if shot.size == PHONE else 480
            alt = f"{page.title}, {shot.label}"
            out.append(
                f'![{alt}](../images/screenshots/{shot.name}.png){{ width="{width}" loading=lazy }}'
            )
        out.append("")
    return "\n".join(out)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def palette_png(width: int, height: int, palette: list[int], index: bytes) -> bytes:
    """An 8-bit palette PNG from colours (0xRRGGBB, at most 256) and one index per pixel,
    row by row: about 40 % of the bytes of the browser's true-colour screenshot, with no
    image library (Pillow is not among the project's packages)."""
    assert len(palette) <= 256 and len(index) == width * height
    rows = b"".join(b"\x00" + index[y * width : (y + 1) * width] for y in range(height))
    plte = b"".join(colour.to_bytes(3, "big") for colour in palette)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)),
            _chunk(b"PLTE", plte),
            _chunk(b"IDAT", zlib.compress(rows, 9)),
            _chunk(b"IEND", b""),
        )
    )
