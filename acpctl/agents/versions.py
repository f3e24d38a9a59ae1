"""Agents' versions, cheaply: an npm agent's version is read from the package.json beside
its resolved executable (claude-agent-acp prints nothing for --version; pi takes 1.6 s to
say it); anything else is probed with its version arguments. What a probe found is cached,
keyed by the executable's real path, size and modification time, so a version is probed
again only when the file changes (or with `agents list --refresh`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from typing import Any

from acpctl import paths
from acpctl.agents import runtimes
from acpctl.agents.discovery import ResolvedAgent, probe_versions
from acpctl.files import atomic_write, read_json_state

PACKAGE_SEARCH_DEPTH = 4  # dist/cli/index.js -> the package's root


def fill_versions(agents: Iterable[ResolvedAgent], refresh: bool = False) -> None:
    """Set each found agent's version (or version_error): from its package.json, else
    from the cache, else by probing (all probes at once), caching what the probes say."""
    cache = {} if refresh else _load()
    to_probe: list[tuple[ResolvedAgent, str | None]] = []
    for agent in agents:
        if agent.argv is None or agent.version is not None:
            continue
        key = _key(agent.argv[0], agent.version_args)
        package = _package_version(agent.argv[0])
        if package is not None:
            agent.version = package
        elif key is not None and key in cache:
            agent.version = cache[key].get("version")
            agent.version_error = cache[key].get("error")
        else:
            to_probe.append((agent, key))
    if not to_probe:
        return
    probe_versions(agent for agent, _ in to_probe)
    for agent, key in to_probe:
        # A timeout may pass; an agent run through npx or uvx was not probed at all.
        transient = "timed out" in (agent.version_error or "") or agent.reason.startswith(
            "through "
        )
        if key is not None and not transient:
            cache[key] = {"version": agent.version, "error": agent.version_error}
    with contextlib.suppress(OSError):
        _save(cache)


def _key(executable: str, version_args: tuple[str, ...]) -> str | None:
    """The cache key of a probe: the executable's real path, size and modification time,
    and the arguments it is probed with."""
    try:
        real = os.path.realpath(executable)
        stat = os.stat(real)
    except OSError:
        return None
    return f"{real}:{stat.st_size}:{stat.st_mtime_ns}:{' '.join(version_args)}"


def _package_version(executable: str) -> str | None:
    """The version in the package.json of the npm package an executable belongs to."""
    manifest = runtimes.package_manifest(executable, PACKAGE_SEARCH_DEPTH)
    return str(manifest["version"]) if manifest else None


def _load() -> dict[str, Any]:
    data = read_json_state(paths.version_cache())
    return data if isinstance(data, dict) else {}


def _save(cache: dict[str, Any]) -> None:
    paths.ensure_private_dir(paths.state_dir())
    atomic_write(paths.version_cache(), json.dumps(cache, indent=1).encode(), sync=False)
