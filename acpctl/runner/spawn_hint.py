"""The agent `run --acp` started last under a name, so the next start spawns it before
reading config.toml and the catalog: editors time `initialize`, and resolving an agent
costs 20 to 30 ms of imports first.

Each hint keeps what its resolution was read from, as it stood then (`resolution_inputs`):
config.toml, the registry's cached copy and the one shipped with acpctl, the agents acpctl
installed, every directory a command is looked up in, and the variables that move them. While
all of that is unchanged, resolving again would give the same agent, so the hint is trusted
and the agent is not resolved at all. Otherwise the hinted agent is only a guess: spawned
early, kept if resolving gives the same command line, ended at once if not.

File times tick coarsely on some systems, so a change made just before a hint is written
may not show in its inputs: such a hint stays a guess until it has settled. And a run
started from a trusted hint resolves the agent again once its editor has gone, so even a
change no input showed costs one run, not every run.

Agents with env of their own in config.toml get no hint: their env (API keys, often) is not
copied out of it."""

from __future__ import annotations

import json
import os
import sys
import time

import acpctl
from acpctl import paths, processes

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without typing's import (mypy reads it so)
if TYPE_CHECKING:
    import subprocess

FILE_NAME = "spawn-hints.json"
# A hint whose inputs changed less than this before it was written is not trusted.
SETTLE_S = 0.2


class Hint:
    """An agent name's last resolution: the agent's own name (the configured default's, for
    no name), its command line, the watchdog's silence, and the inputs it was read from.
    A plain class: dataclasses would cost their import before the spawn."""

    def __init__(self, name: str, argv: list[str], silence_s: float, inputs: list[object]):
        self.name = name
        self.argv = argv
        self.silence_s = silence_s
        self.inputs = inputs

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "argv": self.argv,
            "silence_s": self.silence_s,
            "inputs": self.inputs,
        }


def _stat(path: str) -> list[int] | None:
    # ctime as well as mtime: it moves on a rename into a directory and on a chmod.
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def resolution_inputs() -> list[object]:
    """Everything resolving an agent reads (agents/discovery.py), as it stands now, in
    JSON's terms so that a stored copy compares equal. Files that acpctl replaces (a new
    file renamed over the old) change their directory too; a directory on the search path
    changes when a command appears in it or goes."""
    package = os.path.dirname(acpctl.__file__)
    agents = paths.agents_dir_name()
    registry = paths.registry_dir_name()
    try:
        installed = sorted(os.listdir(agents))
    except OSError:
        installed = []
    search = os.environ.get("PATH", os.defpath)
    watched = [
        paths.config_file_name(),
        paths.config_dir_name(),
        registry,
        os.path.join(registry, "registry.json"),
        os.path.join(package, "agents", "registry.json"),
        os.path.join(package, "agents", "overlay.json"),
        agents,
        *(os.path.join(agents, name) for name in installed),
        # acpctl's own directory is searched before PATH (discovery.acpctl_bin_dir)
        os.path.dirname(os.path.realpath(sys.argv[0])),
        os.path.dirname(sys.executable),
        *search.split(os.pathsep),
    ]
    return [
        acpctl.__version__,
        sys.argv[0],
        sys.executable,
        os.environ.get("HOME"),
        search,
        *([path, _stat(path)] for path in watched),
    ]


def _settled(inputs: list[object]) -> bool:
    """Nothing among the inputs changed in the last SETTLE_S (by ctime, which the
    kernel sets: an mtime can be set to anything)."""
    since = time.time_ns() - int(SETTLE_S * 1e9)
    for entry in inputs:
        if isinstance(entry, list) and isinstance(entry[1], list) and entry[1][3] >= since:
            return False
    return True


def _path() -> str:
    return os.path.join(paths.state_dir_name(), FILE_NAME)


def _read() -> dict[str, object]:
    try:
        with open(_path(), "rb") as file:
            hints = json.loads(file.read())
    except (OSError, ValueError):
        return {}
    return hints if isinstance(hints, dict) else {}


def _parse(value: object) -> Hint | None:
    if not isinstance(value, dict):
        return None
    name, argv = value.get("name"), value.get("argv")
    silence_s, inputs = value.get("silence_s"), value.get("inputs")
    if not (
        isinstance(name, str)
        and isinstance(argv, list)
        and argv
        and all(isinstance(part, str) for part in argv)
        and isinstance(silence_s, (int, float))
        and isinstance(inputs, list)
    ):
        return None
    return Hint(name, argv, float(silence_s), inputs)


def read(agent: str | None) -> Hint | None:
    """The hint for this agent name (None: `run --acp` without --agent), if there is one."""
    return _parse(_read().get(agent or ""))


def spawn(hint: Hint) -> subprocess.Popen[bytes] | None:
    """The hinted agent, started; None when it cannot start."""
    try:
        return processes.spawn(hint.argv, {})
    except OSError:
        return None


def discard(popen: subprocess.Popen[bytes]) -> None:
    """End a hinted agent that turned out not to be the one wanted."""
    processes.kill_group(popen.pid)
    popen.wait()
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            stream.close()


def remember(agent: str | None, hint: Hint | None) -> None:
    """What the next start under this name may spawn early (None: nothing)."""
    from pathlib import Path

    from acpctl.files import atomic_write

    hints = _read()
    key = agent or ""
    wanted = None
    if hint is not None:
        wanted = hint.as_json()
        if not _settled(hint.inputs):
            wanted["inputs"] = []  # a guess: no inputs compare equal
    if hints.get(key) == wanted:
        return
    if wanted is None:
        hints.pop(key, None)
    else:
        hints[key] = wanted
    try:
        paths.ensure_private_dir(paths.state_dir())
        atomic_write(Path(_path()), json.dumps(hints, indent=1).encode(), sync=False)
    except OSError:
        pass  # a hint is worth no error
