"""What `acpctl agents install` installed: one manifest per agent,
`<data>/agents/<id>/installed.json`, naming the version directory and the command line.
Writing the manifest (atomically) is what switches an agent to a new version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from acpctl import paths
from acpctl.files import atomic_write, read_json_state

MANIFEST = "installed.json"
MANIFEST_LIMIT = 1024 * 1024  # a manifest is a few hundred bytes


class Installed(NamedTuple):
    id: str
    version: str
    distribution: str  # npx, uvx or binary
    directory: Path  # <data>/agents/<id>/<version>
    command: list[str]  # absolute executable, then arguments
    env: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {**self._asdict(), "directory": str(self.directory)}


def agent_dir(agent_id: str) -> Path:
    return paths.agents_dir() / agent_id


def read(agent_id: str) -> Installed | None:
    """The agent's manifest, if acpctl installed it (and the executable is still there)."""
    data = read_json_state(agent_dir(agent_id) / MANIFEST, MANIFEST_LIMIT)
    try:
        installed = Installed(
            id=agent_id,
            version=str(data["version"]),
            distribution=str(data["distribution"]),
            directory=Path(data["directory"]),
            command=[str(part) for part in data["command"]],
            env={str(k): str(v) for k, v in data.get("env", {}).items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return installed if Path(installed.command[0]).is_file() else None


def write(installed: Installed) -> None:
    atomic_write(
        agent_dir(installed.id) / MANIFEST, json.dumps(installed.as_json(), indent=1).encode()
    )


def all_ids() -> list[str]:
    try:
        return sorted(p.name for p in paths.agents_dir().iterdir() if (p / MANIFEST).is_file())
    except OSError:
        return []
