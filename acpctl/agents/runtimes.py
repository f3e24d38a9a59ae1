"""The runtimes agents need (node, npm, npx, uv) and whether an npm agent's `engines.node`
accepts the node that will run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

TOOLS = ("node", "npm", "npx", "uv")
PROBE_TIMEOUT_S = 5.0
NPM_VIEW_TIMEOUT_S = 20.0


class EnginesProblem(NamedTuple):
    package: str
    version: str
    wanted: str  # the package's engines.node range
    node: str | None  # node's version, None: no node at all

    def explain(self) -> str:
        have = f"node here is {self.node}" if self.node else "node is not installed"
        return f"{self.package} {self.version} needs node {self.wanted}, and {have}"

    def verdict(self, older_node: str | None) -> str:
        """What this means here, from what the corpus saw the agent do on an older node."""
        if self.node is None:
            return "it cannot start without node"
        if older_node == "runs":
            return "unsupported, but it starts and answers on an older node (seen here)"
        if older_node == "fails":
            return "it fails to start on an older node (seen here)"
        return "it may not start"

    def fix(self, agent: str) -> str:
        return (
            f"install Node.js that matches {self.wanted} (nodejs.org, or `nvm install "
            f"{self.wanted.lstrip('>=^~ ').split('.')[0]}`), or an older release of the "
            f"agent: acpctl agents install {agent} --version VERSION"
        )


@cache
def node_version() -> str | None:
    """`node --version` without its `v`, or None when node is missing or fails."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().removeprefix("v") or None


def package_manifest(executable: str, depth: int = 4) -> dict[str, Any] | None:
    """The package.json of the npm package an executable belongs to (the first one with a
    version and a bin, walking up from the executable's real path), parsed."""
    try:
        real = Path(os.path.realpath(executable))
    except OSError:
        return None
    if "node_modules" not in real.parts:
        return None
    for directory in list(real.parents)[:depth]:
        manifest = directory / "package.json"
        if not manifest.is_file():
            continue
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        # A package.json without a version (dist/'s {"type": "module"}) is not the root.
        if isinstance(data, dict) and isinstance(data.get("version"), str) and data.get("bin"):
            return data
    return None


def engines_problem(executable: str) -> EnginesProblem | None:
    """Whether the engines.node of the npm package `executable` belongs to rules out this
    machine's node."""
    data = package_manifest(executable)
    engines = data.get("engines") if data else None
    wanted = engines.get("node") if isinstance(engines, dict) else None
    if data is None or not isinstance(wanted, str):
        return None
    return engines_against_node(str(data.get("name", "?")), str(data["version"]), wanted)


class NpmRelease(NamedTuple):
    """What the npm registry says of one version of a package."""

    found: bool  # npm has that version
    engines_node: str | None  # its engines.node
    latest: str | None  # when it is missing: npm's newest (None: no such package at all)


def npm_release(package: str, version: str) -> NpmRelease | None:
    """The npm registry's word on `package` at `version`, before anything is installed;
    None when npm cannot say (no npm, offline, a timeout)."""
    pinned = _npm_view(f"{package}@{version}", "version", "engines")
    if pinned is None:
        return None
    found, value = pinned
    if found:
        engines = value.get("engines") if isinstance(value, dict) else None
        wanted = engines.get("node") if isinstance(engines, dict) else None
        return NpmRelease(True, wanted if isinstance(wanted, str) else None, None)
    newest = _npm_view(package, "version")
    if newest is None:
        return None
    latest = newest[1] if newest[0] and isinstance(newest[1], str) else None
    return NpmRelease(False, None, latest)


def npm_latest(package: str) -> str | None:
    """npm's newest version of `package` (`--version latest`)."""
    newest = _npm_view(package, "version")
    return newest[1] if newest and newest[0] and isinstance(newest[1], str) else None


def _npm_view(spec: str, *fields: str) -> tuple[bool, Any] | None:
    """`npm view SPEC FIELDS --json`: (True, its value), (False, None) when npm has no such
    package or version (E404), None when it cannot say."""
    import json

    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        out = subprocess.run(
            [npm, "view", spec, *fields, "--json"],
            capture_output=True,
            text=True,
            timeout=NPM_VIEW_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        value = json.loads(out.stdout) if out.stdout.strip() else None
    except ValueError:
        return None
    if out.returncode == 0:
        return True, value
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and error.get("code") == "E404":
        return False, None
    return None


def engines_against_node(package: str, version: str, wanted: str) -> EnginesProblem | None:
    """`wanted` (an engines.node range) against this machine's node."""
    import nodesemver

    node = node_version()
    if node is not None:
        try:
            if nodesemver.satisfies(node, wanted, loose=True):
                return None
        except (ValueError, TypeError):
            return None  # a range npm itself would not understand: nothing to say
    return EnginesProblem(package, version, wanted, node)


def newer(candidate: str, current: str) -> bool | None:
    """Whether `candidate` is a later version than `current` (None: not comparable)."""
    import nodesemver

    try:
        return bool(nodesemver.gt(candidate, current, loose=True))
    except (ValueError, TypeError):
        return None
