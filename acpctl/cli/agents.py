"""`acpctl agents`: list, add, remove, show and choose the default agent."""

from __future__ import annotations

import sys

import typer

from acpctl.errors import UsageError

app = typer.Typer(
    help="Discover, add and remove agents.", no_args_is_help=True, rich_markup_mode=None
)


@app.command("list")
def list_agents(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Skip the version probes."),
    refresh: bool = typer.Option(
        False, "--refresh", help="Probe versions again instead of using the cached ones."
    ),
) -> None:
    """Show configured and catalog agents, whether each is installed, and its version
    (from an npm agent's package.json, else probed once and cached until the executable
    changes)."""
    from acpctl import config
    from acpctl.agents import discovery, versions

    cfg = config.load()
    agents = discovery.all_agents(cfg)
    if not no_probe:
        versions.fill_versions(agents, refresh=refresh)
    if as_json:
        import json

        typer.echo(
            json.dumps(
                [
                    {
                        "name": a.name,
                        "title": a.title,
                        "kind": a.kind,
                        "command": a.argv,
                        "found": a.found,
                        "version": a.version,
                        "version_error": a.version_error,
                        "source": a.source,
                        "default": a.name == (cfg.default_agent or "demo"),
                        "reason": a.reason or None,
                        "install": a.install or None,
                    }
                    for a in agents
                ],
                indent=2,
            )
        )
        return
    from rich.table import Table

    from acpctl.terminal.render import rich_console

    table = Table(box=None, header_style="bold")
    for column in ("name", "kind", "source", "status", "version", "command / install hint"):
        table.add_column(column)
    default = cfg.default_agent or "demo"
    for a in agents:
        name = f"{a.name} *" if a.name == default else a.name
        if a.found and a.argv:
            status, detail = "[green]found[/]", " ".join(a.argv)
        else:
            status, detail = "[dim]not found[/]", f"[dim]{a.install or a.reason}[/]"
        version = a.version or (f"[dim]unknown ({a.version_error})[/]" if a.version_error else "")
        table.add_row(name, a.kind, a.source, status, version, detail)
    rich_console().print(table)
    typer.echo("* default agent")


@app.command("add", context_settings={"ignore_unknown_options": True})
def add(
    name: str = typer.Argument(..., help="Name to use in acpctl and editors."),
    command: list[str] = typer.Argument(..., help="The agent's command line, after --."),
    kind: str = typer.Option("acp", "--kind", help="acp (native ACP) or pi-rpc."),
    env: list[str] = typer.Option([], "--env", help="K=V, may repeat."),
) -> None:
    """Add (or replace) an agent in config.toml: acpctl agents add NAME -- CMD [ARGS...]."""
    from acpctl import config
    from acpctl.config import AGENT_KINDS, AgentSpec

    if kind not in AGENT_KINDS:
        raise UsageError(f"--kind must be one of {', '.join(AGENT_KINDS)}, not {kind!r}")
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError(f"agent name {name!r} may use only letters, digits, '-', '_' and '.'")
    if "--" in sys.argv:  # `agents add bad name -- x` would store "name" as the command
        after = sys.argv[sys.argv.index("--") + 1 :]
        if list(command) != after:
            stray = " ".join(command[: len(command) - len(after)])
            raise UsageError(
                f"{stray!r} stands between the name and --: an agent name is one word of "
                "letters, digits, '-', '_' and '.' (acpctl agents add NAME -- COMMAND ...)"
            )
    pairs: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes KEY=VALUE, not {item!r}")
        pairs[key] = value
    from acpctl.agents import discovery

    cfg = config.load()
    replaced = name in cfg.agents
    config.set_agent(cfg, AgentSpec(name, command[0], tuple(command[1:]), pairs, kind))
    config.save(cfg)
    typer.echo(f"{'updated' if replaced else 'added'} agent {name} in {cfg.path}")
    if discovery.which(command[0]) is None:
        typer.echo(
            f"acpctl: warning: {command[0]} is not found (on PATH, beside acpctl, or as a "
            "path): install it before an editor starts the agent",
            err=True,
        )


@app.command("remove")
def remove(name: str = typer.Argument(..., help="A configured agent.")) -> None:
    """Remove an agent from config.toml."""
    from acpctl import config

    cfg = config.load()
    if name not in cfg.agents:
        configured = ", ".join(sorted(cfg.agents)) or "none"
        raise UsageError(f"agent {name!r} is not in {cfg.path} (configured: {configured})")
    config.remove_agent(cfg, name)
    config.save(cfg)
    typer.echo(f"removed agent {name} from {cfg.path}")


@app.command("show")
def show(
    name: str = typer.Argument(..., help="Agent name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show how an agent resolves: command, kind, env names, version."""
    from acpctl import config
    from acpctl.agents import catalog, discovery, versions

    cfg = config.load()
    agent = discovery.resolve(cfg, name)
    versions.fill_versions([agent])
    record = {
        "name": agent.name,
        "title": agent.title,
        "kind": agent.kind,
        "source": agent.source,
        "command": agent.argv,
        "found": agent.found,
        "version": agent.version,
        "version_error": agent.version_error,
        "reason": agent.reason or None,
        # Values may be secrets: show only the names.
        "env": sorted(agent.env),
        "install": agent.install or None,
    }
    entry = catalog.entries().get(agent.name)
    if entry is not None and entry.legacy_args:
        # e.g. gemini: releases before --acp took --experimental-acp
        record["older_releases"] = " ".join([entry.binaries[0], *entry.legacy_args])
    if as_json:
        import json

        typer.echo(json.dumps(record, indent=2))
        return
    for key, value in record.items():
        if value not in (None, [], ""):
            shown = " ".join(value) if isinstance(value, list) else value
            typer.echo(f"{key:>14}: {shown}")


@app.command("default")
def default(name: str = typer.Argument(..., help="Agent name.")) -> None:
    """Make NAME the default agent for `acpctl run` and `acpctl install`."""
    from acpctl import config
    from acpctl.agents import discovery

    cfg = config.load()
    discovery.resolve(cfg, name)  # an unknown name exits 2 with the known names
    config.set_default_agent(cfg, name)
    config.save(cfg)
    typer.echo(f"default agent is now {name}")
