"""Reading the runtime records that live `acpctl run` processes keep (for `acpctl ps`)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import psutil

from acpctl import paths
from acpctl.runner.supervisor import is_alive


def live_runs() -> list[dict[str, Any]]:
    """Records of runs that are still alive, with RSS of the run and its agent tree.
    Records of dead runs are deleted on the way."""
    directory = paths.runs_dir()
    runs: list[dict[str, Any]] = []
    if not directory.is_dir():
        return runs
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            pid = int(record["pid"])
            process = psutil.Process(pid)
            alive = is_alive(process)
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
