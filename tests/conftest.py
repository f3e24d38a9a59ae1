"""Shared fixtures: a private acpctl home per test, and helpers to run real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_AGENTS = Path(__file__).resolve().parent / "agents"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty home with every acpctl directory inside it, set in os.environ."""
    root = tmp_path / "home"
    root.mkdir()
    # Nothing of the caller's environment decides where a test reads or writes.
    for variable in list(os.environ):
        if variable.startswith(("XDG_", "ACPCTL_")):
            monkeypatch.delenv(variable)
    for variable, sub in (
        ("ACPCTL_CONFIG_DIR", "config"),
        ("ACPCTL_DATA_DIR", "data"),
        ("ACPCTL_STATE_DIR", "state"),
    ):
        monkeypatch.setenv(variable, str(root / sub))
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
    yield root


def acpctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "acpctl", *args]


def run_cli(
    *args: str, input: str | None = None, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        acpctl_argv(*args),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env=env or dict(os.environ),
    )


def write_executable(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path


def stored_updates(store: Any, session_id: str) -> list[dict[str, Any]]:
    """A stored session's session/update payloads, in order."""
    from acpctl.store.sessions import event_update

    return [u for u in map(event_update, store.iter_events(session_id)) if u is not None]
