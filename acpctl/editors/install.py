"""`acpctl install` / `uninstall`: register agents with a client, or remove them."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from acpctl import config
from acpctl.agents import discovery, managed
from acpctl.agents.catalog import DEMO_AGENT
from acpctl.agents.discovery import ResolvedAgent
from acpctl.editors import clients, created, settings_file
from acpctl.editors.clients import FILE_CLIENTS, SNIPPET_CLIENTS, FileClient
from acpctl.editors.settings_file import Change
from acpctl.errors import UsageError

Echo = Callable[[str], None]


ALIASES = {"neovim": "nvim"}


def _client(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in clients.CLIENT_NAMES:
        raise UsageError(f"unknown client {name!r}; one of: {', '.join(clients.CLIENT_NAMES)}")
    return name


def select_agents(names: list[str], all_agents: bool, echo: Echo) -> list[ResolvedAgent]:
    """The named agents; without names: the configured default, else every agent found on
    this machine, else the demo (each said so)."""
    cfg = config.load()
    if names:
        return [discovery.resolve(cfg, name) for name in names]
    if cfg.default_agent and not all_agents:
        return [discovery.resolve(cfg, cfg.default_agent)]
    found = [a for a in discovery.all_agents(cfg) if a.found and a.name != DEMO_AGENT]
    if found:
        if not all_agents:
            echo(
                "no default agent is configured: registering the agents found on this "
                f"machine: {', '.join(a.name for a in found)} (choose with --agent NAME, or "
                "set a default with `acpctl agents default NAME`)"
            )
        return found
    echo(
        "no agent found on this machine: registering the built-in demo agent, an echo "
        "that needs no model. Install a real one (`acpctl agents list` says how), then "
        "`acpctl install CLIENT --agent NAME`"
    )
    return [discovery.resolve(cfg, DEMO_AGENT)]


def launcher_warnings(command: list[str], entry: str = "the entry") -> list[str]:
    """Warn when the acpctl written into an editor's config (or a service's unit: `entry`)
    lives somewhere short-lived."""
    warnings = []
    temp = Path(tempfile.gettempdir()).resolve()
    # As written (a virtualenv's python is a link out of it) and as it resolves (a link on
    # PATH into a short-lived place).
    for path in dict.fromkeys((Path(command[0]).absolute(), Path(command[0]).resolve())):
        if temp in path.parents or Path(tempfile.gettempdir()) in path.parents:
            warnings.append(
                f"{path} is in a temporary directory: {entry} breaks when it is "
                "cleaned up; install acpctl with pipx or uv tool instead"
            )
        elif Path.cwd().resolve() in path.parents and any(
            part in (".venv", "venv", ".tox", ".nox") for part in path.parts
        ):
            warnings.append(
                f"{path} is in this project's virtualenv: {entry} breaks when it is "
                "removed; install acpctl with pipx or uv tool instead"
            )
        if warnings:
            break
    return warnings


def _settings_paths(client: FileClient, settings: Path | None) -> list[Path]:
    if settings is not None:
        return [settings]
    detected = client.detected()
    if client.name == "vscode":
        if not detected:
            raise UsageError(
                "no VS Code, VS Code Insiders, VSCodium or Cursor user settings found",
                hint="pass --settings PATH/settings.json",
            )
        return detected
    if client.name == "zed" and not detected:
        raise UsageError(
            f"Zed's config directory was not found ({client.paths()[-1].parent})",
            hint="start Zed once, or pass --settings PATH",
        )
    return detected[:1] or client.paths()[-1:]


def existing_entries(path: Path, container: tuple[str, ...]) -> dict[str, Any]:
    """The client's agent entries in the file (UsageError when it cannot be used)."""
    text, document = settings_file.read_document(path)
    settings_file.container_node_check(path, document, container)
    entries = settings_file.lookup(settings_file.parsed(path, text), container)
    return entries if isinstance(entries, dict) else {}


def install(
    client_name: str,
    agent_names: list[str],
    all_agents: bool,
    settings: Path | None,
    dry_run: bool,
    print_only: bool,
    echo: Echo,
    warn: Echo,
    offer: Callable[[str], bool] = lambda _: False,
    busy: Callable[[str], AbstractContextManager[None]] = lambda _: contextlib.nullcontext(),
) -> None:
    """Write the agents' entries; an agent the registry can install is offered first
    (`offer` asks on a terminal, or answers --yes). `busy` shows a status line while the
    files are written (not while a question is asked)."""
    client_name = _client(client_name)
    agents = select_agents(agent_names, all_agents, warn)
    command = clients.launcher()
    for index, agent in enumerate(agents):
        if agent.found:
            continue
        if agent.entry is not None and agent.entry.distributions and not dry_run:
            question = f"{agent.name} is not installed; install it now"
            if offer(question):
                managed.install(agent.entry, None, None, echo, lambda _: True)
                agents[index] = agent = discovery.resolve(config.load(), agent.name)
                continue
        warn(
            f"agent {agent.name} is not installed yet ({agent.install or agent.reason}); "
            "its entry is written anyway"
        )
    if client_name in SNIPPET_CLIENTS:
        echo(SNIPPET_CLIENTS[client_name](agents, command))
        return
    client = FILE_CLIENTS[client_name]
    entries = {client.entry_key(a): client.entry_value(a, command) for a in agents}
    if print_only:
        echo(json.dumps(entries, indent=2))
        return
    written = False
    with busy(f"installing into {client_name}..."):
        for path in _settings_paths(client, settings):
            written = _write_entries(client, path, entries, dry_run, echo) or written
    if written or dry_run:  # said once entries point (or would point) at this acpctl
        for warning in launcher_warnings(command):
            warn(warning)


def _write_entries(
    client: FileClient, path: Path, entries: dict[str, Any], dry_run: bool, echo: Echo
) -> bool:
    """Write (or, dry, show) the entries into one file, saying what became of each;
    whether any was written."""
    changes = [Change(client.container, key, value) for key, value in entries.items()]
    result = settings_file.edit(path, changes, dry_run=dry_run)
    made_container = settings_file.lookup(result.before, client.container) is None
    if made_container and result.changed and not dry_run:
        created.remember(path, client.container)  # uninstall takes it out again
    existing = settings_file.lookup(result.before, client.container) or {}
    written = False
    for key, value in entries.items():
        old = existing.get(key)
        if old == value:
            state = "unchanged"
        elif old is None:
            state = "would add" if dry_run else "added"
        else:
            fields = (
                sorted(k for k in {*old, *value} if old.get(k) != value.get(k))
                if isinstance(old, dict)
                else ["value"]
            )
            state = f"{'would update' if dry_run else 'updated'} ({', '.join(fields)})"
        written = written or (old != value and not dry_run)
        echo(f"{client.title}: {key}: {state} in {path}")
    if dry_run and result.diff:
        echo(result.diff)
    if result.backup:
        echo(f"backup: {result.backup}")
    return written


def uninstall(
    client_name: str,
    agent_names: list[str],
    all_agents: bool,
    settings: Path | None,
    dry_run: bool,
    echo: Echo,
) -> None:
    client_name = _client(client_name)
    if client_name in SNIPPET_CLIENTS:
        echo(
            f"{client_name}'s configuration is code that acpctl never wrote: remove the "
            "snippet from your config by hand"
        )
        return
    client = FILE_CLIENTS[client_name]
    # Without --agent: every entry acpctl wrote there (--all says the same).
    wanted = set(agent_names) if agent_names and not all_agents else None
    paths = [settings] if settings else [p for p in client.paths() if p.exists()]
    removed = 0
    for path in paths:
        if not path.exists():
            continue
        existing = existing_entries(path, client.container)
        keys = [
            key
            for key, value in existing.items()
            if client.is_ours(value)
            and (wanted is None or clients.agent_of(client.entry_argv(value)) in wanted)
        ]
        if not keys:
            continue
        changes = [Change(client.container, k) for k in keys]
        container = client.container
        emptied = set(existing) == set(keys) and created.created(path, container)
        if emptied:  # install made it: it goes with the last entry, as it came
            changes.append(Change(container[:-1], container[-1]))
        result = settings_file.edit(path, changes, dry_run=dry_run)
        if emptied and not dry_run:
            created.forget(path, container)
        for key in keys:
            echo(f"{client.title}: {key}: {'would remove' if dry_run else 'removed'} from {path}")
        if dry_run and result.diff:
            echo(result.diff)
        if result.backup:
            echo(f"backup: {result.backup}")
        removed += len(keys)
    if not removed:
        echo(f"{client.title}: no acpctl entries to remove")


def list_clients(echo: Echo) -> list[dict[str, Any]]:
    """Detected clients with their acpctl entries; printed, and returned for --json."""
    report = []
    for client in FILE_CLIENTS.values():
        for path in client.detected():
            record: dict[str, Any] = {
                "client": client.name,
                "path": str(path),
                "exists": path.exists(),
                "entries": {},
            }
            if path.exists():
                try:
                    existing = existing_entries(path, client.container)
                except UsageError as exc:
                    record["error"] = exc.message
                    existing = {}
                record["entries"] = {
                    key: clients.agent_of(client.entry_argv(value))
                    for key, value in existing.items()
                    if client.is_ours(value)
                }
            report.append(record)
    for record in report:
        entries = ", ".join(f"{k} -> {v}" for k, v in record["entries"].items()) or "none"
        state = record.get("error") or ("" if record["exists"] else "(no file yet)")
        echo(f"{record['client']:<10} {record['path']} {state}\n{'':<10} acpctl entries: {entries}")
    if not report:
        echo(
            "no ACP clients detected (zed, jetbrains, vscode, acpx); "
            "nvim, emacs and toad take a snippet: acpctl install nvim"
        )
    return report


def stderr(message: str) -> None:
    print(f"acpctl: warning: {message}", file=sys.stderr)
