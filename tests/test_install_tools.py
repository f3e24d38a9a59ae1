"""Issue 17: acpctl installs from a checkout as users install tools, with pipx and with
uv, and the installed command runs a turn."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def checkout(tmp_path: Path) -> Path:
    """The repository's files as a fresh checkout has them (no venv, no node_modules)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    target = tmp_path / "acpctl"
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            (target / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name.decode())
    return target


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_a_checkout_installs_with_pipx_and_uv(home: Path, tmp_path: Path, tool: str) -> None:
    if subprocess.run([sys.executable, "-m", tool, "--version"], capture_output=True).returncode:
        pytest.skip(f"{tool} is not installed (pip install '.[test]' brings it)")
    source = checkout(tmp_path)
    bin_dir = tmp_path / "bin"
    env = {
        **os.environ,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(bin_dir),
        "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(bin_dir),
    }
    command = ["install", str(source)] if tool == "pipx" else ["tool", "install", str(source)]
    installed = subprocess.run(
        [sys.executable, "-m", tool, *command], env=env, capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    acpctl = bin_dir / "acpctl"
    assert subprocess.run([acpctl, "--version"], capture_output=True, text=True).stdout.startswith(
        "acpctl 0."
    )
    turn = subprocess.run(
        [acpctl, "run", "hello"], env=env, capture_output=True, text=True, timeout=60
    )
    assert turn.returncode == 0 and "You said: hello" in turn.stdout, turn.stderr
