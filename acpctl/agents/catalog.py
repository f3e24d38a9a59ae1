"""The catalog: every agent of the ACP registry (registry.py), completed by acpctl's overlay
(overlay.json: short names, binaries to look for on PATH, version arguments, pi's own RPC
mode), plus the built-in `demo` agent."""

from __future__ import annotations

import json
import os
import re
import sys
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from acpctl.agents import registry

DEMO_AGENT = "demo"
DISTRIBUTION_KINDS = ("binary", "npx", "uvx")  # the order `agents install` prefers


class Distribution(NamedTuple):
    """One way to get an agent: an npm or PyPI package (with its version), or this
    platform's archive."""

    kind: str  # npx, uvx or binary
    package: str | None
    archive: str | None
    cmd: str | None  # binary: the executable's path inside the archive
    sha256: str | None
    args: tuple[str, ...]
    env: dict[str, str]


class CatalogEntry(NamedTuple):
    id: str  # the registry's id
    name: str  # what acpctl calls it: the overlay's alias, else the id
    title: str
    description: str
    version: str | None  # the registry's current version
    kind: str  # acp or pi-rpc
    binaries: tuple[str, ...]
    args: tuple[str, ...]  # for a binary found on PATH
    version_args: tuple[str, ...]
    legacy_args: tuple[str, ...]
    env: dict[str, str]
    distributions: dict[str, Distribution]  # what can be installed on this platform
    platforms: tuple[str, ...]  # where its binary distribution has builds
    website: str | None
    endpoint: tuple[str, str] | None  # (the variable that moves it, its default URL)
    # On a node older than its package's engines.node, what the corpus saw it do: "runs"
    # (unsupported, yet it starts and answers) or "fails"; None: not known.
    older_node: str | None = None
    # Where it keeps its own state and credentials: writable in its sandbox (sandbox.py).
    state_dirs: tuple[str, ...] = ()
    # The variables it needs in its sandbox beside the base set (a trailing * a prefix).
    sandbox_env: tuple[str, ...] = ()

    @property
    def install_hint(self) -> str:
        if self.distributions:
            return f"acpctl agents install {self.name}"
        if self.platforms:
            return (
                f"the registry has no {self.name} build for {platform_key()} "
                f"(only {', '.join(self.platforms)})"
            )
        return self.website or f"see the {self.name} project's install instructions"


def platform_key() -> str:
    """This machine in the registry's terms: darwin|linux|windows - aarch64|x86_64."""
    system = {"darwin": "darwin", "win32": "windows"}.get(sys.platform, "linux")
    # os.uname, not the platform module: this runs at every `run --acp` start
    machine = (
        os.uname().machine if hasattr(os, "uname") else os.environ["PROCESSOR_ARCHITECTURE"]
    ).lower()
    machine = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64"}.get(machine, machine)
    return f"{system}-{machine}"


def _distributions(raw: dict[str, Any]) -> tuple[dict[str, Distribution], tuple[str, ...]]:
    result: dict[str, Distribution] = {}
    platforms: tuple[str, ...] = ()
    for kind in DISTRIBUTION_KINDS:
        item = raw.get(kind)
        if not isinstance(item, dict):
            continue
        if kind == "binary":
            platforms = tuple(sorted(item))
            item = item.get(platform_key())
            if not isinstance(item, dict):
                continue
        result[kind] = Distribution(
            kind=kind,
            package=item.get("package"),
            archive=item.get("archive"),
            cmd=item.get("cmd"),
            sha256=item.get("sha256"),
            args=tuple(item.get("args") or ()),
            env=dict(item.get("env") or {}),
        )
    return result, platforms


# C0 and C1 controls, DEL among them: an OSC or ANSI sequence in a registry's text would
# drive the terminal (set its title, move the cursor) when printed.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (`\\x1b`), not sent raw."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _entry(agent: dict[str, Any], overlay: dict[str, Any]) -> CatalogEntry:
    distributions, platforms = _distributions(agent.get("distribution") or {})
    first = next(iter(distributions.values()), None)
    binaries = overlay.get("binaries")
    if binaries is None:  # an archive's executable may be on PATH under its own name
        cmd = distributions["binary"].cmd if "binary" in distributions else None
        binaries = [PurePosixPath(cmd.replace("\\", "/")).name] if cmd else []
    return CatalogEntry(
        id=agent["id"],
        name=overlay.get("alias", agent["id"]),
        title=printable(str(agent.get("name") or agent["id"])),
        description=printable(str(agent.get("description") or "")),
        version=agent.get("version"),
        kind=overlay.get("kind", "acp"),
        binaries=tuple(binaries),
        args=tuple(overlay.get("args", first.args if first else ())),
        version_args=tuple(overlay.get("version_args", ["--version"])),
        legacy_args=tuple(overlay.get("legacy_args", ())),
        env={**(first.env if first else {}), **overlay.get("env", {})},
        distributions=distributions,
        platforms=platforms,
        website=printable(str(agent.get("website") or agent.get("repository") or "")) or None,
        endpoint=tuple(overlay["endpoint"]) if "endpoint" in overlay else None,
        older_node=overlay.get("older_node"),
        state_dirs=tuple(overlay.get("state", ())),
        sandbox_env=tuple(overlay.get("sandbox_env", ())),
    )


@cache
def entries() -> dict[str, CatalogEntry]:
    """Every catalog agent by acpctl's name for it, sorted by name."""
    document, _ = registry.load()
    overlay = json.loads((Path(__file__).parent / "overlay.json").read_bytes())["agents"]
    agents = {a["id"]: a for a in document["agents"] if isinstance(a, dict) and "id" in a}
    for agent_id, extra in overlay.items():
        if agent_id not in agents and "distribution" in extra:  # acpctl's own entries
            agents[agent_id] = {"id": agent_id, **extra}
    result = [_entry(agent, overlay.get(agent_id, {})) for agent_id, agent in agents.items()]
    return {entry.name: entry for entry in sorted(result, key=lambda e: e.name)}


def lookup(name: str) -> CatalogEntry | None:
    """An entry by acpctl's name or by its registry id."""
    found = entries().get(name)
    if found is None:
        found = next((e for e in entries().values() if e.id == name), None)
    return found


def demo_argv() -> list[str]:
    """The built-in demo agent runs in the same interpreter as acpctl itself."""
    return [sys.executable, "-m", "acpctl.demo_agent"]
