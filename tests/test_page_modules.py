"""Issue 52, 7: the page's code is ES modules by job (acpctl/host/web/), loaded with no build
step; the parts with no DOM are tested by node's own test runner (tests/web/*.test.mjs).
The browser tests (test_pairing.py) cover the rest."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from acpctl.host.page import WEB

TESTS = Path(__file__).parent / "web"


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_pages_modules_pass_their_node_tests() -> None:
    files = sorted(str(path) for path in TESTS.glob("*.test.mjs"))
    assert files
    done = subprocess.run(["node", "--test", *files], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"^# fail 0$", done.stdout, re.MULTILINE), done.stdout[-2000:]


def test_every_module_the_page_imports_is_one_of_its_files() -> None:
    """A module imports its siblings by relative name (the import map gives their hashed
    addresses): a name that is no file would fail only in the browser."""
    for module in WEB.glob("*.js"):
        for name in re.findall(
            r'^import .* from "(?:\./|/assets/)([^"]+)";$', module.read_text(), re.M
        ):
            assert (WEB / name).is_file(), (module.name, name)
