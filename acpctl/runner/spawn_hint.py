"""The command line `run --acp` spawned last for an agent name, so the next start spawns
the agent before reading config.toml and the catalog: editors time `initialize`, and
resolving an agent costs 20 to 30 ms of imports first. Only a hint: the agent is resolved
as always while it boots, and a hint that turns out wrong costs one spawn, killed at once.
Agents with env of their own in config.toml get no hint: their env (API keys, often) is not
copied out of it."""

from __future__ import annotations

import json
import os
import subprocess

from acpctl import paths, processes

FILE_NAME = "spawn-hints.json"


def _path() -> str:
    # A string path: pathlib is not imported before the spawn.
    return os.path.join(paths.state_dir_name(), FILE_NAME)


def _read() -> dict[str, list[str]]:
    try:
        with open(_path(), "rb") as file:
            hints = json.loads(file.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(hints, dict):
        return {}
    return {
        key: value
        for key, value in hints.items()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value)
    }


def spawn(agent: str | None) -> tuple[list[str], subprocess.Popen[bytes]] | None:
    """The agent last spawned under this name, started again now; None without a hint or
    when it cannot start."""
    argv = _read().get(agent or "")
    if argv is None:
        return None
    try:
        return argv, processes.spawn(argv, {})
    except OSError:
        return None


def discard(popen: subprocess.Popen[bytes]) -> None:
    """End a hinted agent that turned out not to be the one wanted."""
    processes.kill_group(popen.pid)
    popen.wait()
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            stream.close()


def remember(agent: str | None, argv: list[str] | None) -> None:
    """What the next start under this name may spawn early (None: nothing)."""
    from pathlib import Path

    from acpctl.files import atomic_write

    hints = _read()
    key = agent or ""
    if hints.get(key) == argv:
        return
    if argv is None:
        hints.pop(key, None)
    else:
        hints[key] = argv
    try:
        paths.ensure_private_dir(paths.state_dir())
        atomic_write(Path(_path()), json.dumps(hints, indent=1).encode(), sync=False)
    except OSError:
        pass  # a hint is worth no error
