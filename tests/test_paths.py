"""Where acpctl keeps its files: platformdirs' answer, and the one path `run --acp` needs
before it spawns the agent computed without importing platformdirs (issue 16)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from acpctl import paths

LINUX_CASES = [
    {"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"},
    {"XDG_STATE_HOME": "relative/state", "HOME": "/home/u"},  # not absolute: ignored
    {"XDG_STATE_HOME": "", "HOME": "/home/u/"},
    {"HOME": "/"},
    {"HOME": "/home/with space"},
]


@pytest.mark.skipif(sys.platform != "linux", reason="the shortcut is taken on Linux only")
@pytest.mark.parametrize("env", LINUX_CASES)
def test_the_state_directory_is_platformdirs_answer(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACPCTL_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    assert paths.state_dir() == Path(platformdirs.user_state_dir(paths.APP_NAME))


def test_the_override_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_STATE_HOME", "/elsewhere")
    assert paths.state_dir() == tmp_path / "state"
    assert paths.state_dir_name() == str(tmp_path / "state")


def test_the_spawn_path_imports_nothing_heavy() -> None:
    """What `run --acp` imports before it spawns the agent: no platformdirs, pathlib or
    typing (12 to 15 ms together, which editors would wait for at initialize)."""
    code = (
        "import sys\n"
        "import acpctl.__main__, acpctl.runner.main, acpctl.runner.spawn_hint\n"
        "print(' '.join(m for m in ('platformdirs', 'pathlib', 'typing') if m in sys.modules))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert imported == []
