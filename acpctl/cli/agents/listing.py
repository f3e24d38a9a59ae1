"""`acpctl agents list` and `show`: the catalog and the configured agents, with what
acpctl knows of each (installed, runs, last failure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from acpctl.cli.agents.app import app

if TYPE_CHECKING:
    from rich.console import Console

    from acpctl.agents import discovery


@app.command("list")
def list_agents(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    installed_only: bool = typer.Option(
        False, "--installed", help="Only the agents found on this machine."
    ),
    no_probe: bool = typer.Option(False, "--no-probe", help="Skip the version probes."),
    refresh: bool = typer.Option(
        False, "--refresh", help="Probe versions again instead of using the cached ones."
    ),
) -> None:
    """Show every agent of the ACP registry and config.toml: whether it is installed and
    from where (acpctl's own install, PATH, config, npx/uvx), its version against the
    registry's, and how it is distributed. Versions come from an npm agent's package.json,
    else a probe cached until the executable changes."""
    from acpctl import config
    from acpctl.agents import discovery, versions

    cfg = config.load()
    # What this machine has first (configured, installed, the demo), then the catalog.
    agents = sorted(discovery.all_agents(cfg), key=lambda a: not a.found)
    if installed_only:
        agents = [a for a in agents if a.found]
    if not no_probe:
        versions.fill_versions(agents, refresh=refresh)
    default = cfg.default_agent or "demo"
    records = [_record(a, default, cfg.sandbox_for(a.name) is not None) for a in agents]
    if as_json:
        import json

        typer.echo(json.dumps(records, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    from acpctl.terminal.render import rich_console

    console = rich_console()
    if not console.is_terminal or console.width < WIDE_TABLE_COLUMNS:
        _compact(agents, records, default, console)
        return

    table = Table(box=None, header_style="bold")
    for column in ("name", "installed", "version", "registry", "via", "command / about"):
        table.add_column(column)
    for a, record in zip(agents, records, strict=True):
        name = f"{a.name} *" if a.name == default else a.name
        version = a.version or (f"[dim]? ({a.version_error})[/]" if a.version_error else "")
        latest = record["registry_version"] or ""
        if record["update_available"]:
            latest = f"[yellow]{latest} (update available)[/]"
        if a.remote is not None:
            status, detail = "[green]remote[/]", escape(a.remote.address)
        elif a.found and a.argv:
            sandboxed = "[sandbox] " if record["sandbox"] else ""
            status, detail = f"[green]{a.origin}[/]", escape(sandboxed + " ".join(a.argv))
        else:  # installable ones say what they are; the rest how to get them
            about = a.entry.description if a.entry and a.entry.distributions else a.install
            status, detail = "[dim]no[/]", f"[dim]{escape(about or a.reason)}[/]"
        via = ", ".join(record["distributions"])
        table.add_row(name, status, escape(version), latest, via, detail)
    console.print(table)
    typer.echo(
        "* default agent. `acpctl agents install NAME` installs one; "
        "`acpctl agents update` refreshes the registry."
    )


WIDE_TABLE_COLUMNS = 120  # narrower, or on a pipe: the compact list


def _compact(
    agents: list[discovery.ResolvedAgent],
    records: list[dict[str, Any]],
    default: str,
    console: Console,
) -> None:
    """A line for each agent this machine has (where from, its version, an update), then
    the catalog's other agents by name only: the full table is 200 lines at 80 columns."""
    import textwrap

    from rich.markup import escape

    rows = []
    for agent, record in zip(agents, records, strict=True):
        if not agent.found:
            continue
        update = f" ({record['registry_version']} available)" if record["update_available"] else ""
        where = agent.remote.address if agent.remote is not None else " ".join(agent.argv or [])
        where = f"[sandbox] {where}" if record["sandbox"] else where
        name = f"{agent.name} *" if agent.name == default else agent.name
        rows.append((name, agent.origin or "", agent.version or "", update, where))
    name_width = max((len(row[0]) for row in rows), default=0)
    origin_width = max((len(row[1]) for row in rows), default=0)
    version_width = max((len(row[2] + row[3]) for row in rows), default=0)
    for name, origin, version, update, where in rows:
        padding = " " * (version_width - len(version + update))
        console.print(
            f"{escape(name.ljust(name_width))}  [green]{escape(origin.ljust(origin_width))}[/]  "
            f"{escape(version)}[yellow]{escape(update)}[/]{padding}  {escape(where)}".rstrip(),
            soft_wrap=True,
        )
    others = [agent.name for agent in agents if not agent.found]
    if others:
        names = textwrap.fill(
            ", ".join(others),
            width=78,
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        console.print(f"\n[dim]not installed ({len(others)}):\n{escape(names)}[/]", soft_wrap=True)
    typer.echo(
        "\n* default agent. `acpctl agents show NAME` for one, `acpctl agents install NAME`"
        "\nto install one; on a terminal 120 columns wide, the full table (--json: all)."
    )


def _record(
    agent: discovery.ResolvedAgent, default: str, sandboxed: bool = False
) -> dict[str, Any]:
    from acpctl.agents import runtimes

    entry = agent.entry
    latest = entry.version if entry else None
    update = None
    if agent.found and agent.version and latest and agent.origin != "builtin":
        update = runtimes.newer(latest, agent.version)
    return {
        "name": agent.name,
        "id": entry.id if entry else None,
        "title": agent.title,
        "kind": agent.kind,
        "command": agent.argv,
        "remote": agent.remote.address if agent.remote else None,
        "found": agent.found,
        "installed_from": agent.origin,
        "version": agent.version,
        "version_error": agent.version_error,
        "registry_version": latest,
        "update_available": update,
        "distributions": sorted(entry.distributions) if entry else [],
        "source": agent.source,
        "default": agent.name == default,
        "sandbox": sandboxed,
        "reason": agent.reason or None,
        "install": agent.install or None,
    }


@app.command("show")
def show(
    name: str = typer.Argument(..., help="Agent name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show how an agent resolves: command, kind, env names, version, and what the
    registry says of it."""
    from acpctl import config
    from acpctl.agents import discovery, versions

    cfg = config.load()
    agent = discovery.resolve(cfg, name)
    versions.fill_versions([agent])
    record = _record(agent, cfg.default_agent or "demo", cfg.sandbox_for(agent.name) is not None)
    if agent.entry is not None:
        record["description"] = agent.entry.description or None
    record["env"] = sorted(agent.env)  # values may be secrets: only the names
    settings = cfg.sandbox_for(agent.name)
    if settings is not None:
        from acpctl import sandbox

        # What its sandbox withholds of this environment, by name (docs/sandbox.md).
        needs = (agent.state_dirs, agent.sandbox_env, agent.env.get("HOME"))
        confined = sandbox.policy(settings, None, *needs)  # the names as a start has them
        record["sandbox_withheld"] = confined.withheld(agent.env)
    entry = agent.entry
    if entry is not None and entry.legacy_args and entry.binaries:
        # e.g. gemini: releases before --acp took --experimental-acp
        record["older_releases"] = " ".join([entry.binaries[0], *entry.legacy_args])
    if as_json:
        import json

        typer.echo(json.dumps(record, indent=2))
        return
    for key, value in record.items():
        if value not in (None, [], "", False):
            shown = " ".join(value) if isinstance(value, list) else value
            typer.echo(f"{key:>16}: {shown}")
