"""Issue 42, 7: the page's assets ship in the wheel: the vendored renderer and sanitizer
are the versions acpctl/host/web/VENDOR.md records, and all of the page's own files stay
within 250 KB compressed."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re

from acpctl.host.page import CONTENT_TYPES, WEB

BUDGET = 250 * 1024


def test_the_vendored_files_are_the_versions_recorded() -> None:
    recorded = (WEB / "VENDOR.md").read_text()
    for name, package in (
        ("markdown-it.esm.min.js", "markdown-it"),
        ("purify.min.js", "DOMPurify"),
    ):
        banner = (WEB / name).read_text()[:300]
        version = re.search(rf"{package} (\d+\.\d+\.\d+)", banner)
        assert version is not None, banner
        assert f"| `{name}` |" in recorded and f"| {version.group(1)} |" in recorded


def test_the_pages_files_are_small() -> None:
    served = [path for path in WEB.iterdir() if path.suffix in CONTENT_TYPES]
    assert {"index.html", "app.js", "markdown-it.esm.min.js", "purify.min.js"} <= {
        p.name for p in served
    }
    compressed = sum(len(gzip.compress(path.read_bytes(), 9)) for path in served)
    assert compressed <= BUDGET, compressed


def test_the_page_maps_each_module_to_its_hashed_name_and_allows_only_that_map() -> None:
    """The page's import map names every module under its content-hashed name, and its
    policy allows that map by its hash and no other inline script."""
    from acpctl.host.page import ASSETS, Site

    site = Site()
    html = site.pages["/"].identity.decode()
    (mapping,) = re.findall(r'<script type="importmap">(.*?)</script>', html)
    imports = json.loads(mapping)["imports"]
    assert imports[ASSETS + "app.js"] == ASSETS + site.assets["app.js"].hashed
    digest = base64.b64encode(hashlib.sha256(mapping.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in site.policy and "unsafe-inline" not in site.policy
