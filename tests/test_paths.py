"""Where acpctl keeps its files: platformdirs' answer, and the one path `run --acp` needs
before it spawns the agent computed without importing platformdirs (issue 16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from acpctl import paths

XDG_VARIABLES = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
LINUX_CASES = [
    {"XDG_CONFIG_HOME": "/x/config", "XDG_DATA_HOME": "/x/data", "XDG_STATE_HOME": "/x/state"},
    {"XDG_CONFIG_HOME": "rel/c", "XDG_DATA_HOME": "rel/d", "XDG_STATE_HOME": "rel/s"},
    {"XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "", "XDG_STATE_HOME": "", "HOME": "/home/u/"},
    {"HOME": "/"},
    {"HOME": "/home/with space"},
]


@pytest.mark.skipif(sys.platform != "linux", reason="the shortcut is taken on Linux only")
@pytest.mark.parametrize("env", LINUX_CASES)
def test_the_directories_are_platformdirs_answers(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in (*XDG_VARIABLES, "ACPCTL_CONFIG_DIR", "ACPCTL_DATA_DIR", "ACPCTL_STATE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", "/home/u")
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    app = paths.APP_NAME
    assert paths.config_dir() == Path(platformdirs.user_config_dir(app))
    assert paths.data_dir() == Path(platformdirs.user_data_dir(app))
    assert paths.state_dir() == Path(platformdirs.user_state_dir(app))
    assert paths.sessions_dir() == Path(platformdirs.user_data_dir(app)) / "sessions"


def test_the_overrides_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("config", "data", "state"):
        monkeypatch.setenv(f"ACPCTL_{name.upper()}_DIR", str(tmp_path / name))
        monkeypatch.setenv(f"XDG_{name.upper()}_HOME", "/elsewhere")
    monkeypatch.setenv("ACPCTL_SESSION_DIR", "~/sessions")
    assert paths.config_dir() == tmp_path / "config"
    assert paths.data_dir() == tmp_path / "data"
    assert paths.state_dir() == tmp_path / "state"
    assert paths.state_dir_name() == str(tmp_path / "state")
    assert paths.sessions_dir() == Path.home() / "sessions"


@pytest.mark.e2e
def test_on_linux_no_command_imports_platformdirs_to_find_its_directories() -> None:
    code = (
        "import sys\n"
        "from acpctl import paths\n"
        "paths.config_dir(), paths.data_dir(), paths.state_dir()\n"
        "print('platformdirs' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACPCTL_", "XDG_"))}
    imported = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    assert imported == str(sys.platform != "linux")


@pytest.mark.e2e
def test_the_jsonrpc_package_imports_no_asyncio() -> None:
    """Its messages, codes and framing serve code that has no event loop (the store's
    readers, the commands); the asyncio parts are modules of their own."""
    code = "import sys, acpctl.jsonrpc\nprint('asyncio' in sys.modules)"
    imported = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert imported == "False"
