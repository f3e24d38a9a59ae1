"""Every path acpctl reads or writes, in one place.

platformdirs gives the per-OS defaults; the ACPCTL_* variables override them (tests and
people with unusual layouts rely on that). Directories acpctl creates are private (0700):
they hold conversation history and agent logs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "acpctl"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _override(variable: str) -> Path | None:
    value = os.environ.get(variable)
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    return _override("ACPCTL_CONFIG_DIR") or Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    return _override("ACPCTL_DATA_DIR") or Path(platformdirs.user_data_dir(APP_NAME))


def state_dir() -> Path:
    return _override("ACPCTL_STATE_DIR") or Path(platformdirs.user_state_dir(APP_NAME))


def config_file() -> Path:
    return config_dir() / "config.toml"


def sessions_dir() -> Path:
    return _override("ACPCTL_SESSION_DIR") or data_dir() / "sessions"


def agents_dir() -> Path:
    """Agents that `acpctl agents install` installed, one directory per registry id."""
    return data_dir() / "agents"


def logs_dir() -> Path:
    return state_dir() / "logs"


def runs_dir() -> Path:
    """Runtime records of live `acpctl run` processes (read by `acpctl ps`)."""
    return state_dir() / "runs"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` with mode 0700, and each missing parent too, whatever the umask;
    tighten `path` if it already exists."""
    missing = []
    parent = path
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        directory.chmod(PRIVATE_DIR_MODE)  # mkdir's mode passes through the umask
    if (path.stat().st_mode & 0o777) != PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def tighten(root: Path) -> None:
    """Make everything under `root` private (0700 directories, 0600 files): for what a
    backend's child process (pi) writes into the store with its own umask."""
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), PRIVATE_DIR_MODE, follow_symlinks=False)
        for name in files:
            target = os.path.join(directory, name)
            if not os.path.islink(target):
                os.chmod(target, PRIVATE_FILE_MODE)
