"""`acpctl agents update`, `install`, `upgrade` and `uninstall`: the registry fetched, and
the agents acpctl installs in its own directory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from acpctl.agents.limits import DEFAULT_LIMITS, Limits
from acpctl.cli.agents.app import app
from acpctl.errors import UsageError

if TYPE_CHECKING:
    from acpctl.agents.catalog import CatalogEntry


@app.command("update")
def update(
    origin: str = typer.Option(
        None, "--from", help="A registry URL or file (default: the live ACP registry)."
    ),
    timeout: float = typer.Option(15.0, "--timeout", help="Seconds to wait for the server."),
) -> None:
    """Fetch the ACP registry (only when it changed: ETag / If-Modified-Since) into
    acpctl's data directory; offline or malformed, the copy stays as it was."""
    from acpctl.agents import registry

    result = registry.update(origin, timeout)
    count = len(result.after.get("agents", []))
    if not result.changed:
        typer.echo(f"the registry is up to date ({count} agents, {result.origin})")
        return
    typer.echo(f"registry updated from {result.origin}: {count} agents")
    before = {a.get("id"): a.get("version") for a in result.before.get("agents", [])}
    for agent in result.after.get("agents", []):
        old = before.get(agent.get("id"))
        if agent.get("id") not in before:
            typer.echo(f"  new: {agent.get('id')} {agent.get('version')}")
        elif old != agent.get("version"):
            typer.echo(f"  {agent.get('id')}: {old} -> {agent.get('version')}")


@app.command("install")
def install(
    name: str = typer.Argument(..., help="A catalog agent (acpctl agents list)."),
    version: str = typer.Option(None, "--version", help="Another version than the registry's."),
    via: str = typer.Option(None, "--via", help="npx, uvx or binary (default: binary first)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed off a terminal)."),
    timeout: float = typer.Option(
        DEFAULT_LIMITS.download_s, "--timeout", help="Seconds an archive's whole download may take."
    ),
    max_unpacked: int = typer.Option(
        DEFAULT_LIMITS.unpacked_bytes >> 20, "--max-unpacked", help="MiB an archive may unpack to."
    ),
    max_members: int = typer.Option(
        DEFAULT_LIMITS.members, "--max-members", help="Files and directories an archive may hold."
    ),
    min_rate: int = typer.Option(
        DEFAULT_LIMITS.min_rate,
        "--min-rate",
        help="Bytes a second an archive's download must keep up over each 30 s (0: any).",
    ),
) -> None:
    """Install an agent from the registry into acpctl's own directory: an npm or PyPI
    package, or this platform's archive (checked against the registry's sha256). It then
    resolves before PATH and npx."""
    from acpctl.agents import managed

    if timeout <= 0 or max_unpacked <= 0 or max_members <= 0:
        raise UsageError("--timeout, --max-unpacked and --max-members must be positive")
    if min_rate < 0:
        raise UsageError("--min-rate must be 0 (any) or more")
    limits = Limits(timeout, max_unpacked << 20, max_members, min_rate)
    managed.install(
        _entry(name), version, via, typer.echo, confirmer(yes), _busy_commands(), limits
    )


@app.command("upgrade")
def upgrade(
    name: str = typer.Argument(None, help="An agent acpctl installed."),
    all_agents: bool = typer.Option(False, "--all", help="Every agent acpctl installed."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed off a terminal)."),
) -> None:
    """Install the registry's version of agents acpctl installed, when it is newer (asked
    first, as install asks)."""
    from acpctl.agents import installed, managed

    if (name is None) == (not all_agents):
        raise UsageError("name an agent, or pass --all")
    from acpctl.agents import catalog

    ids = [_entry(name).id] if name else installed.all_ids()
    if not ids:
        typer.echo("acpctl installed no agents yet (acpctl agents install NAME)")
    for agent_id in ids:
        entry = catalog.lookup(agent_id)
        if entry is None:  # an update dropped it from the registry
            typer.echo(f"{agent_id}: no longer in the registry; left as it is")
            continue
        managed.upgrade(entry, typer.echo, confirmer(yes), _busy_commands())


@app.command("uninstall")
def uninstall(name: str = typer.Argument(..., help="An agent acpctl installed.")) -> None:
    """Remove an agent acpctl installed; refused while an editor entry or a live run uses
    it."""
    from acpctl.agents import managed

    entry = _entry(name)
    users = _users(entry.name, entry.id)
    if users:
        ways = []
        if any(" entry " in user for user in users):
            ways.append(f"acpctl uninstall CLIENT --agent {entry.name} removes an editor entry")
        if any(user.startswith("run pid ") for user in users):
            ways.append("end the run first")
        raise UsageError(f"{entry.name} is in use: {'; '.join(users)}", hint="; ".join(ways))
    managed.uninstall(entry, typer.echo)


def confirmer(yes: bool) -> Callable[[str], bool]:
    """Ask on a terminal; off one, only --yes says yes (nothing is installed unasked)."""

    def confirm(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError(f"{question.rstrip('?')}: pass --yes to confirm off a terminal")
        return typer.confirm(question, default=True)

    return confirm


def _entry(name: str) -> CatalogEntry:
    from acpctl.agents import catalog
    from acpctl.agents.discovery import did_you_mean

    entry = catalog.lookup(name)
    if entry is None:
        raise UsageError(
            f"{name!r} is not in the catalog{did_you_mean(name, catalog.entries())}",
            hint="`acpctl agents list` shows every agent",
        )
    return entry


def _busy_commands() -> list[str]:
    """The executables of live runs' agents (their install is not removed under them)."""
    from acpctl.runner.runs import live_runs

    return [str(run["command"][0]) for run in live_runs() if run.get("command")]


def _users(*names: str) -> list[str]:
    """Editor entries and live runs that use an agent, said in a few words each."""
    from acpctl.editors import install
    from acpctl.runner.runs import live_runs

    users = [
        f"{record['client']} entry {key!r} ({record['path']})"
        for record in install.list_clients(lambda _: None)
        for key, agent in record["entries"].items()
        if agent in names
    ]
    users += [f"run pid {run['pid']}" for run in live_runs() if run.get("agent") in names]
    return users
