"""Issue 19 (item 4): `sessions export --format html` is one self-contained page that shows
the conversation as an editor would, checked as text and rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def page(home: Path, tmp_path: Path) -> Path:
    prompt = "think, plan and edit: **bold** <script>alert(1)</script> [x](javascript:alert(1))"
    assert run_cli("run", "--agent", "demo", "--approve-all", prompt).returncode == 0
    (session,) = json.loads(run_cli("sessions", "list", "--json").stdout)
    out = tmp_path / "session.html"
    exported = run_cli("sessions", "export", session["id"], "--format", "html", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert out.stat().st_mode & 0o777 == 0o600  # a transcript is private
    return out


def test_the_page_is_self_contained_and_shows_the_conversation(page: Path) -> None:
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    # nothing from elsewhere, nothing that runs
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|\bsrc=", text, re.I)
    assert 'href="javascript' not in text  # the agent's unsafe link is left as text
    # and nothing could run: the page's own policy forbids scripts and fetches
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'\"" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # the prompt, escaped
    # as an editor shows it
    assert "<dt>agent</dt><dd>demo</dd>" in text and "<dt>tokens</dt>" in text
    assert "<details><summary>Thinking</summary>" in text  # folded
    assert '<ul class="plan">' in text
    assert '<details class="tool" open><summary>' in text and '<span class="add">+' in text
    assert "Permission asked: Edit" in text and "Answered: allow" in text
    assert "<strong>bold</strong>" in text  # the agent's Markdown, rendered
    assert "turn ended: end_turn" in text


def distinct_bytes(png: bytes) -> int:
    """How many byte values the decompressed pixel rows hold: a blank page has a few."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        if kind == b"IDAT":
            data += png[position + 8 : position + 8 + length]
        position += 12 + length
    return len(set(zlib.decompress(data)))


def screenshot(chromium: str, url: str, out: Path) -> bytes:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={out}",
            "--window-size=1000,1400",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return out.read_bytes()


def test_chromium_renders_the_page(page: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    empty = distinct_bytes(screenshot(chromium, blank.as_uri(), tmp_path / "blank.png"))
    shown = distinct_bytes(screenshot(chromium, page.as_uri(), tmp_path / "page.png"))
    assert empty < 16 < 64 < shown, (empty, shown)
