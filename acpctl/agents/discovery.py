"""Resolve agent names to command lines, and probe their versions.

Resolution order for a command: config.toml; for catalog agents, what `acpctl agents
install` installed; then the directory holding the running acpctl (a venv's bin/ where
acpctl and a pip-installed agent live together), then PATH, then, only when
`package_runners = true`, the registry's npx or uvx package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from acpctl import __version__, processes
from acpctl.agents import installed
from acpctl.agents.catalog import (
    DEMO_AGENT,
    CatalogEntry,
    Distribution,
    demo_argv,
    entries,
    lookup,
)
from acpctl.config import AgentSpec, Config, Remote
from acpctl.errors import UsageError

VERSION_TIMEOUT_S = 2.0
_VERSION_RE = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.-]+)?)\b")


class ResolvedAgent:
    """An agent name resolved to a command line (argv None: not found, `reason` says why)."""

    def __init__(
        self,
        name: str,
        title: str,
        kind: str,
        source: str,
        argv: list[str] | None,
        env: dict[str, str] | None = None,
        reason: str = "",
        install: str = "",
        version_args: tuple[str, ...] = ("--version",),
        version: str | None = None,
        origin: str | None = None,
        entry: CatalogEntry | None = None,
        remote: Remote | None = None,
    ) -> None:
        self.name = name
        self.title = title
        self.kind = kind
        self.source = source  # "config", "catalog" or "builtin"
        self.argv = argv
        self.env = env or {}
        self.reason = reason  # why it was not found, or how it was found
        self.install = install
        self.version_args = version_args
        self.version = version
        self.version_error: str | None = None
        # where the command was found: config, acpctl (its own install), path, npx, uvx,
        # builtin; None when it was not
        self.origin = origin
        self.entry = entry  # the catalog's entry for this agent, if it has one
        self.remote = remote  # where a remote agent is (it has no argv here)

    @property
    def found(self) -> bool:
        return self.argv is not None or self.remote is not None

    @property
    def state_dirs(self) -> tuple[str, ...]:
        """Its own state and credentials, which its sandbox lets it write (the catalog's)."""
        return self.entry.state_dirs if self.entry is not None else ()

    @property
    def sandbox_env(self) -> tuple[str, ...]:
        """The variables its sandbox lets through beside the base set (the catalog's: its
        model provider's keys and endpoints)."""
        return self.entry.sandbox_env if self.entry is not None else ()

    def as_spec(self) -> AgentSpec:
        if self.remote is not None:
            return AgentSpec(self.name, "", (), self.env, self.kind, self.remote)
        if self.argv is None:
            raise UsageError(
                f"agent {self.name!r} is not installed: {self.reason}", hint=self.install or None
            )
        return AgentSpec(self.name, self.argv[0], tuple(self.argv[1:]), self.env, self.kind)


def acpctl_bin_dir() -> Path:
    """The directory of the running acpctl (its console script, or the interpreter's)."""
    script = Path(sys.argv[0])
    if script.name == "acpctl" and script.parent != Path():
        return script.resolve().parent
    return Path(sys.executable).parent


def which(name: str) -> str | None:
    """Find a command: a path as given, else acpctl's own directory, else PATH."""
    if os.sep in name or (os.altsep and os.altsep in name):
        candidate = Path(name).expanduser()
        return str(candidate.absolute()) if os.access(candidate, os.X_OK) else None
    return shutil.which(name, path=str(acpctl_bin_dir())) or shutil.which(name)


# Interpreters named bare in a configured command (`python3 my_agent.py`): they run the
# user's program, so they are the user's, found on PATH, never the ones beside acpctl (its
# venv's python has acpctl's packages, not the agent's); and their --version is not the
# agent's version.
INTERPRETER = re.compile(r"(python|pypy|node|nodejs|bun|deno|ruby|perl|php|java)[\d.]*")


def _is_interpreter(command: str) -> bool:
    return os.sep not in command and INTERPRETER.fullmatch(command) is not None


def _explain_missing(command: str, on_path_only: bool = False) -> str:
    candidate = Path(command).expanduser()
    if os.sep in command and candidate.exists():
        return f"{command} is not executable (chmod +x it)"
    return f"{command} not found on PATH" + ("" if on_path_only else " or beside acpctl")


def _from_config(spec: AgentSpec) -> ResolvedAgent:
    """A configured agent; one with a catalog name keeps the catalog's title and hint."""
    entry = lookup(spec.name)
    if spec.remote is not None:
        return ResolvedAgent(
            name=spec.name,
            title=entry.title if entry else spec.name,
            kind=spec.kind,
            source="config",
            argv=None,
            reason=f"remote: {spec.remote.address}",
            origin="remote",
            version_args=(),
            remote=spec.remote,
        )
    interpreter = _is_interpreter(spec.command)
    found = shutil.which(spec.command) if interpreter else which(spec.command)
    return ResolvedAgent(
        name=spec.name,
        title=entry.title if entry else spec.name,
        kind=spec.kind,
        source="config",
        argv=[found, *spec.args] if found else None,
        env=dict(spec.env),
        reason="" if found else _explain_missing(spec.command, on_path_only=interpreter),
        install=entry.install_hint if entry else "",
        origin="config" if found else None,
        entry=entry,
        version_args=() if interpreter else ("--version",),
    )


def _from_catalog(entry: CatalogEntry, package_runners: bool) -> ResolvedAgent:
    agent = ResolvedAgent(
        name=entry.name,
        title=entry.title,
        kind=entry.kind,
        source="catalog",
        argv=None,
        env=dict(entry.env),
        install=entry.install_hint,
        version_args=entry.version_args,
        entry=entry,
    )
    own = installed.read(entry.id)
    if own is not None:
        agent.argv, agent.env, agent.origin = own.command, {**entry.env, **own.env}, "acpctl"
        agent.reason = f"installed by acpctl in {own.directory}"
        return agent
    for binary in entry.binaries:
        found = which(binary)
        if found:
            agent.argv, agent.origin = [found, *entry.args], "path"
            return agent
    for kind in ("npx", "uvx"):
        distribution = entry.distributions.get(kind)
        runner = shutil.which(kind) if package_runners and distribution else None
        if runner and distribution and distribution.package:
            agent.argv = [*_package_runner(kind, runner, distribution), *distribution.args]
            agent.env = {**distribution.env, **entry.env}
            agent.reason, agent.origin = f"through {kind}", kind
            return agent
    looked_for = ", ".join(entry.binaries) or "its command"
    agent.reason = f"not installed ({looked_for} not found on PATH or beside acpctl)"
    return agent


def _demo() -> ResolvedAgent:
    return ResolvedAgent(
        name=DEMO_AGENT,
        title="Demo",
        kind="acp",
        source="builtin",
        argv=demo_argv(),
        reason="built in",
        version=__version__,
        version_args=(),
        origin="builtin",
    )


def all_agents(config: Config) -> list[ResolvedAgent]:
    """Configured agents first, then catalog agents not shadowed by config, then demo."""
    result = [_from_config(spec) for spec in config.agents.values()]
    for name, entry in entries().items():
        if name not in config.agents and entry.id not in config.agents:
            result.append(_from_catalog(entry, config.package_runners))
    if DEMO_AGENT not in config.agents:
        result.append(_demo())
    return result


def _package_runner(kind: str, runner: str, distribution: Distribution) -> list[str]:
    """npx or uvx running the package's command: the one named as the package, or the
    registry's `cmd` inside it (npx --package PKG CMD, uvx --from PKG CMD)."""
    assert distribution.package is not None
    if kind == "npx":
        if distribution.cmd:
            return [runner, "--yes", "--package", distribution.package, distribution.cmd]
        return [runner, "--yes", distribution.package]
    if distribution.cmd:
        return [runner, "--from", distribution.package, distribution.cmd]
    return [runner, distribution.package]


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """ "; did you mean 'X'?" with the closest of `names` to a mistyped `name`, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def known_names(config: Config) -> list[str]:
    return sorted({*config.agents, *entries(), DEMO_AGENT})


def resolve(config: Config, name: str | None) -> ResolvedAgent:
    """The agent to run: `name`, else the configured default, else the demo agent."""
    name = name or config.default_agent or DEMO_AGENT
    if name in config.agents:
        return _from_config(config.agents[name])
    entry = lookup(name)
    if entry is not None:
        return _from_catalog(entry, config.package_runners)
    if name == DEMO_AGENT:
        return _demo()
    raise UsageError(
        f"unknown agent {name!r}{did_you_mean(name, known_names(config))}",
        hint="`acpctl agents list` shows them all; add your own with: "
        "acpctl agents add NAME -- COMMAND [ARGS...]",
    )


def parse_version(output: str) -> str | None:
    for line in output.splitlines():
        match = _VERSION_RE.search(line)
        if match:
            return match.group(1)
    return None


def probe_version(agent: ResolvedAgent, timeout: float = VERSION_TIMEOUT_S) -> None:
    """Fill in agent.version or agent.version_error; never raises."""
    if agent.argv is None or agent.version is not None or not agent.version_args:
        return
    if agent.reason.startswith("through "):
        agent.version_error = f"not probed (runs {agent.reason})"
        return
    argv = [agent.argv[0], *agent.version_args]
    try:
        # A session of its own, so a hung probe is killed with all its children.
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        agent.version_error = f"cannot run {argv[0]}: {exc.strerror or exc}"
        return
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.kill_group(process.pid)
        process.communicate()
        agent.version_error = f"version probe timed out after {timeout:g}s"
        return
    text = output.decode("utf-8", "replace")
    version = parse_version(text[:4096])
    if version is None:
        first = text.strip().splitlines()[0][:60] if text.strip() else "(no output)"
        agent.version_error = f"unrecognised version output: {first!r}"
    else:
        agent.version = version


def probe_versions(agents: Iterable[ResolvedAgent], timeout: float = VERSION_TIMEOUT_S) -> None:
    """Probe concurrently: the whole batch takes about as long as the slowest probe."""
    todo = [a for a in agents if a.argv is not None and a.version is None]
    if not todo:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        list(pool.map(lambda a: probe_version(a, timeout), todo))
