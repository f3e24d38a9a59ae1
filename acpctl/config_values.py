"""Checked values of config.toml, shared by its parsers (config.py, serve_config.py): a
refusal that names the file and says nothing was written, a flag, a number of seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acpctl.errors import UsageError


def fail(path: Path, message: str) -> UsageError:
    return UsageError(f"{path}: {message}", hint="fix the file by hand; acpctl wrote nothing")


def flag(path: Path, table: dict[str, Any], key: str, where: str = "") -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise fail(path, f"{where}{key} must be true or false")
    return value


def seconds(path: Path, plain: dict[str, Any], key: str, default: float, zero: str) -> float:
    value = plain.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise fail(path, f"{key} must be a number of seconds (0: {zero})")
    return float(value)
