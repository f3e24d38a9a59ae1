"""The built-in catalog of well-known agents (data in catalog.json) plus the `demo` agent."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import NamedTuple

DEMO_AGENT = "demo"


class CatalogEntry(NamedTuple):
    name: str
    title: str
    kind: str
    binaries: tuple[str, ...]
    args: tuple[str, ...]
    install: str
    version_args: tuple[str, ...]
    legacy_args: tuple[str, ...]
    env: dict[str, str]
    runner: str | None
    package: str | None


@cache
def entries() -> dict[str, CatalogEntry]:
    raw = json.loads((Path(__file__).parent / "catalog.json").read_text(encoding="utf-8"))
    result: dict[str, CatalogEntry] = {}
    for item in raw["agents"]:
        result[item["name"]] = CatalogEntry(
            name=item["name"],
            title=item["title"],
            kind=item["kind"],
            binaries=tuple(item["binaries"]),
            args=tuple(item["args"]),
            install=item["install"],
            version_args=tuple(item.get("version_args", ["--version"])),
            legacy_args=tuple(item.get("legacy_args", [])),
            env=dict(item.get("env", {})),
            runner=item.get("runner"),
            package=item.get("package"),
        )
    return result


def demo_argv() -> list[str]:
    """The built-in demo agent runs in the same interpreter as acpctl itself."""
    return [sys.executable, "-m", "acpctl.demo_agent"]
