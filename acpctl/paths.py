"""Every path acpctl reads or writes, in one place.

platformdirs gives the per-OS defaults; the ACPCTL_* variables override them (tests and
people with unusual layouts rely on that). Directories acpctl creates are private (0700):
they hold conversation history and agent logs.

platformdirs and pathlib are imported where they are used, not here: `run --acp` reads its
spawn hint from the state directory before it spawns the agent, editors time `initialize`,
and the two cost 12 ms of imports.
"""

from __future__ import annotations

import os
import sys

# mypy reads this name as typing.TYPE_CHECKING; typing's import costs 3 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

APP_NAME = "acpctl"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _path(name: str) -> Path:
    from pathlib import Path

    return Path(name)


def _override(variable: str) -> Path | None:
    value = os.environ.get(variable)
    return _path(value).expanduser() if value else None


def config_dir() -> Path:
    import platformdirs

    return _override("ACPCTL_CONFIG_DIR") or _path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    import platformdirs

    return _override("ACPCTL_DATA_DIR") or _path(platformdirs.user_data_dir(APP_NAME))


def state_dir() -> Path:
    return _path(state_dir_name())


def state_dir_name() -> str:
    """state_dir() as a string, and on Linux without platformdirs' 10 ms of imports:
    platformdirs' rule there is $XDG_STATE_HOME when it is an absolute path, else
    ~/.local/state with an absolute $HOME (tests/test_paths.py holds the two to the same
    answer). Anything else is platformdirs' to decide."""
    override = os.environ.get("ACPCTL_STATE_DIR")
    if override:
        return os.path.expanduser(override)
    if sys.platform == "linux":
        xdg_state = os.environ.get("XDG_STATE_HOME", "")
        if os.path.isabs(xdg_state):
            return os.path.join(xdg_state, APP_NAME)
        home = os.environ.get("HOME", "")
        if os.path.isabs(home):
            return os.path.join(home, ".local", "state", APP_NAME)
    import platformdirs

    return platformdirs.user_state_dir(APP_NAME)


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
