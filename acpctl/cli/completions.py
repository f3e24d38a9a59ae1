"""`acpctl completions SHELL`: the shell completion script (bash, zsh or fish).

The scripts are typer's: they ask acpctl itself for completions at each TAB (through the
_ACPCTL_COMPLETE variable), so they stay right as commands change. completions/ holds them
checked in; tests/test_docs.py fails when they are stale.
"""

from __future__ import annotations

from typing import Any

import typer

from acpctl.errors import UsageError

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VARIABLE = "_ACPCTL_COMPLETE"


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    if shell not in SHELLS:
        raise UsageError(f"unknown shell {shell!r}; one of: {', '.join(SHELLS)}")
    return (
        get_completion_script(prog_name="acpctl", complete_var=COMPLETE_VARIABLE, shell=shell)
        + "\n"
    )


def command_line() -> list[str]:
    """The arguments acpctl was run with, as given (click keeps only what it parsed):
    cli.main puts them in the root context."""
    import click

    argv = click.get_current_context().find_root().obj
    return list(argv) if isinstance(argv, list) else []


def agent_names(incomplete: str) -> list[str]:
    """Shell completion for --agent: configured, catalog and built-in agent names."""
    from acpctl import config
    from acpctl.agents import discovery

    try:
        names = discovery.known_names(config.load())
    except UsageError:
        return []
    return [name for name in names if name.startswith(incomplete)]


def client_names(incomplete: str) -> list[str]:
    """Shell completion for install's and uninstall's CLIENT."""
    from acpctl.editors.clients import CLIENT_NAMES

    return [name for name in [*CLIENT_NAMES, "neovim"] if name.startswith(incomplete)]


def shell_names(incomplete: str) -> list[str]:
    return [name for name in SHELLS if name.startswith(incomplete)]


MAX_SESSIONS_COMPLETED = 200


def session_names(incomplete: str) -> list[str]:
    """Shell completion for a session argument: the newest sessions' names and ids (every
    command that takes an id takes a name)."""
    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import SessionStore

    try:
        metas = SessionIndex(SessionStore()).readable()[:MAX_SESSIONS_COMPLETED]
    except (OSError, ValueError):
        return []
    words = [word for meta in metas for word in (meta.name, meta.id) if word]
    return [word for word in dict.fromkeys(words) if word.startswith(incomplete)]


def session_argument(default: Any, help: str) -> Any:
    """A session argument whose values the shell completes."""
    return typer.Argument(default, help=help, autocompletion=session_names)


def agent_option(default: Any, help: str, short: bool = True) -> Any:
    """An --agent option whose values the shell completes."""
    names = ("--agent", "-a") if short else ("--agent",)
    return typer.Option(default, *names, help=help, autocompletion=agent_names)


def completions(
    shell: str = typer.Argument(..., help="bash, zsh or fish", autocompletion=shell_names),
) -> None:
    """Print the completion script for SHELL (see the README for where to put it)."""
    typer.echo(script(shell), nl=False)
