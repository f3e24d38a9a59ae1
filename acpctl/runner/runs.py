"""Live runs: the record each `acpctl run --acp` keeps while it lives, the live runs found
from those records (`acpctl ps`, `sessions`), and the agent processes a dead run left.

<state>/runs/<pid>.json is written by the run and removed when it ends; a record whose
process is gone is deleted by the next reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acpctl import paths, processes
from acpctl.files import atomic_write

if TYPE_CHECKING:
    import psutil


class RunRecord:
    """<state>/runs/<pid>.json, rewritten when sessions open or close, removed on exit."""

    def __init__(self, agent: str, command: list[str], log_file: Path) -> None:
        paths.ensure_private_dir(paths.runs_dir())
        self.path = path_of(os.getpid())
        self.data: dict[str, Any] = {
            "pid": os.getpid(),
            "agent": agent,
            "command": command,
            "started": time.time(),
            "log": str(log_file),
            "agentPid": None,
            "sessions": [],
        }
        self.write()

    def write(self) -> None:
        # No fsync: the record only has to outlive this process, not a power cut.
        atomic_write(self.path, json.dumps(self.data).encode(), sync=False)

    def update(self, **changes: Any) -> None:
        # Called on every prompt (the agent may have restarted): write only a change.
        if all(self.data.get(key) == value for key, value in changes.items()):
            return
        self.data.update(changes)
        self.write()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def path_of(pid: int) -> Path:
    """Where the run with this pid keeps its record."""
    return paths.runs_dir() / f"{pid}.json"


def live_runs() -> list[dict[str, Any]]:
    """Records of runs that are still alive, with RSS of the run and its agent tree.
    Records of dead runs are deleted on the way."""
    import psutil

    directory = paths.runs_dir()
    runs: list[dict[str, Any]] = []
    if not directory.is_dir():
        return runs
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            pid = int(record["pid"])
            process = psutil.Process(pid)
            alive = processes.is_alive(process)
            # A recycled pid is not our run: the process must have started by then.
            alive = alive and process.create_time() <= float(record["started"]) + 1
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            alive = False
        if not alive:
            path.unlink(missing_ok=True)
            continue
        rss = 0
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                rss += member.memory_info().rss
        record["rss"] = rss
        runs.append(record)
    return runs


def orphans() -> list[psutil.Process]:
    """Agent processes started by an acpctl run that is gone (of this acpctl home; an
    agent without the mark is from an acpctl before it, and counts too)."""
    import psutil

    found = []
    me = os.getpid()
    home = paths.state_dir_name()  # as processes.spawn marks them
    for process in psutil.process_iter(["pid"]):
        try:
            environ = process.environ()
        except (psutil.Error, OSError):
            continue
        owner = environ.get(processes.RUN_PID_VARIABLE)
        if not owner or not owner.isdigit() or int(owner) == me:
            continue
        if environ.get(processes.RUN_STATE_VARIABLE, home) != home:
            continue
        if not processes.pid_alive(int(owner)):
            found.append(process)
    return found
