"""The containers (`agent_servers`, ...) that `acpctl install` created in a settings file,
recorded in acpctl's state, so that `acpctl uninstall` removes such a container again once
its entries are gone, and the file is byte for byte what it was. A container the user made,
even an empty one, is never recorded, and so never removed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from acpctl import paths
from acpctl.files import atomic_write, read_json_state

RECORD = "created-containers.json"


def _record() -> Path:
    return paths.state_dir() / RECORD


def _read() -> dict[str, list[list[str]]]:
    stored: Any = read_json_state(_record())  # a broken record: as if none (never fatal)
    files = stored.get("files") if isinstance(stored, dict) else None
    if not isinstance(files, dict):
        return {}
    return {
        path: [list(c) for c in containers if isinstance(c, list)]
        for path, containers in files.items()
        if isinstance(path, str) and isinstance(containers, list)
    }


def _write(files: dict[str, list[list[str]]]) -> None:
    paths.ensure_private_dir(_record().parent)
    text = json.dumps({"files": {path: c for path, c in files.items() if c}}, indent=2)
    atomic_write(_record(), (text + "\n").encode())


def _key(settings: Path) -> str:
    return os.path.realpath(settings)  # as the settings file is edited: through links


def created(settings: Path, container: tuple[str, ...]) -> bool:
    return list(container) in _read().get(_key(settings), [])


def remember(settings: Path, container: tuple[str, ...]) -> None:
    files = _read()
    kept = files.setdefault(_key(settings), [])
    if list(container) not in kept:
        kept.append(list(container))
        _write(files)


def forget(settings: Path, container: tuple[str, ...]) -> None:
    files = _read()
    kept = files.get(_key(settings), [])
    if list(container) in kept:
        kept.remove(list(container))
        _write(files)
