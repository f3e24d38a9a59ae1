"""Every path acpctl reads or writes, in one place.

platformdirs gives the per-OS defaults; the ACPCTL_* variables override them (tests and
people with unusual layouts rely on that). Directories acpctl creates are private (0700):
they hold conversation history and agent logs.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from acpctl.errors import AcpctlError

APP_NAME = "acpctl"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


# The three per-user directories: (acpctl's override, the XDG variable, its default under
# $HOME, platformdirs' function).
_CONFIG = ("ACPCTL_CONFIG_DIR", "XDG_CONFIG_HOME", ".config", "user_config_dir")
_DATA = ("ACPCTL_DATA_DIR", "XDG_DATA_HOME", ".local/share", "user_data_dir")
_STATE = ("ACPCTL_STATE_DIR", "XDG_STATE_HOME", ".local/state", "user_state_dir")


def _directory(kind: tuple[str, str, str, str]) -> str:
    """acpctl's override, else platformdirs' answer. On Linux that answer is a rule simple
    enough to follow without importing platformdirs in every command: $XDG_*_HOME when it
    is an absolute path, else the default under an absolute $HOME (tests/test_paths.py
    holds the two to the same answer). Anything else is platformdirs' to decide."""
    override, xdg_variable, under_home, platformdirs_function = kind
    if value := os.environ.get(override):
        return os.path.expanduser(value)
    if sys.platform == "linux":
        xdg = os.environ.get(xdg_variable, "")
        if os.path.isabs(xdg):
            return os.path.join(xdg, APP_NAME)
        home = os.environ.get("HOME", "")
        if os.path.isabs(home):
            return os.path.join(home, under_home, APP_NAME)
    import platformdirs

    return str(getattr(platformdirs, platformdirs_function)(APP_NAME))


def config_dir() -> Path:
    return Path(_directory(_CONFIG))


def data_dir() -> Path:
    return Path(_directory(_DATA))


def state_dir() -> Path:
    return Path(_directory(_STATE))


def state_dir_name() -> str:
    """The state directory as given (the mark processes.spawn puts on agents, compared as
    a string by doctor's orphan check)."""
    return _directory(_STATE)


def config_file() -> Path:
    return config_dir() / "config.toml"


def sessions_dir() -> Path:
    value = os.environ.get("ACPCTL_SESSION_DIR")
    return Path(value).expanduser() if value else data_dir() / "sessions"


def agents_dir() -> Path:
    """Agents that `acpctl agents install` installed, one directory per registry id."""
    return data_dir() / "agents"


def registry_dir() -> Path:
    """The cached copy of the ACP registry, and where it came from."""
    return data_dir() / "registry"


def locks_dir() -> Path:
    """Locks held while a settings file is edited."""
    return state_dir() / "locks"


def version_cache() -> Path:
    """Agents' versions as last probed, by command and the binary's stat."""
    return state_dir() / "versions.json"


def logs_dir() -> Path:
    return state_dir() / "logs"


def runs_dir() -> Path:
    """Runtime records of live `acpctl run` processes (read by `acpctl ps`)."""
    return state_dir() / "runs"


def host_socket() -> Path:
    """The session host's unix socket (`acpctl serve`); its directory is private."""
    return state_dir() / "host" / "acp.sock"


def host_tokens() -> Path:
    """The session host's bearer tokens, one a role (0600)."""
    return config_dir() / "host-tokens.json"


def host_devices() -> Path:
    """The devices paired with the session host: names, roles, credential digests (0600)."""
    return config_dir() / "host-devices.json"


def host_push_key() -> Path:
    """The session host's VAPID key, which signs its Web Push messages (0600)."""
    return config_dir() / "push-vapid.pem"


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


def own_private_dir(path: Path) -> Path:
    """ensure_private_dir for a directory whose contents nobody else may control (the
    session host's socket, lock and pid): refused, before anything is changed in it, when
    it is a symbolic link or another user's."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ensure_private_dir(path)
    if stat.S_ISLNK(info.st_mode):
        raise AcpctlError(
            f"{path} is a symbolic link; acpctl does not follow it here",
            hint=f"remove it (acpctl makes the directory): rm {path}",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise AcpctlError(f"{path} is not a directory", hint=f"remove it: rm {path}")
    if info.st_uid != os.getuid():
        raise AcpctlError(
            f"{path} belongs to another user (uid {info.st_uid}); acpctl uses only its own",
            hint=f"remove it, or run acpctl as that user (ls -ld {path})",
        )
    return ensure_private_dir(path)


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
