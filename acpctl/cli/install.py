"""`acpctl install` and `acpctl uninstall`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from acpctl.cli.completions import agent_option, client_names
from acpctl.errors import UsageError


def install(
    client: str = typer.Argument(
        None,
        help="zed, jetbrains, vscode, acpx; nvim (or neovim), emacs, toad print a snippet",
        autocompletion=client_names,
    ),
    agent: list[str] = agent_option(
        [],
        "Agent to register; repeat (default: the configured default, else every agent "
        "found here, else the demo).",
    ),
    all_agents: bool = typer.Option(False, "--all", help="Every configured or found agent."),
    settings: Path = typer.Option(None, "--settings", help="Edit this file instead."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print a diff, write nothing."),
    print_only: bool = typer.Option(False, "--print", help="Print the entries as JSON."),
    list_: bool = typer.Option(False, "--list", help="Show detected clients and entries."),
    as_json: bool = typer.Option(False, "--json", help="With --list: print a JSON array."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Install agents that are not installed without asking."
    ),
) -> None:
    """Register agents in an editor's settings (comments and formatting untouched). An
    agent that is not installed yet is offered for install (asked on a terminal)."""
    from acpctl.editors import install as command

    if list_:
        if as_json:
            import json

            typer.echo(json.dumps(command.list_clients(lambda _: None), indent=2))
        else:
            command.list_clients(typer.echo)
        return
    if client is None:
        raise UsageError("name a client: acpctl install zed (or --list)")

    def offer(question: str) -> bool:
        if yes or not sys.stdin.isatty():
            return yes
        return typer.confirm(question, default=True)

    from acpctl.terminal.render import status

    command.install(
        client,
        agent,
        all_agents,
        settings,
        dry_run,
        print_only,
        typer.echo,
        command.stderr,
        offer,
        status,
    )


def uninstall(
    client: str = typer.Argument(
        ..., help="zed, jetbrains, vscode, acpx", autocompletion=client_names
    ),
    agent: list[str] = agent_option([], "Agent to remove; repeat (default: every one)."),
    all_agents: bool = typer.Option(
        False, "--all", help="Every entry acpctl wrote (the default without --agent)."
    ),
    settings: Path = typer.Option(None, "--settings", help="Edit this file instead."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print a diff, write nothing."),
) -> None:
    """Remove the entries acpctl wrote (and nothing else)."""
    from acpctl.editors import install as command

    command.uninstall(client, agent, all_agents, settings, dry_run, typer.echo)
