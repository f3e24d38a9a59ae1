"""`acpctl run`: with --acp, the ACP server an editor launches."""

from __future__ import annotations

import typer

from acpctl.errors import UsageError


def run(
    acp_mode: bool = typer.Option(False, "--acp", help="Serve ACP on stdio (for editors)."),
    agent: str = typer.Option(None, "--agent", "-a", help="Agent name (default: configured "
                              "default, else the built-in demo)."),
    no_history: bool = typer.Option(False, "--no-history",
                                    help="Do not record new sessions in the history store."),
) -> None:
    """Run an agent. With --acp: the supervised ACP relay an editor launches."""
    from acpctl.runner.main import TTY_HINT, serve

    if not acp_mode:
        raise UsageError("only `acpctl run --acp` is available in this version", hint=TTY_HINT)
    raise typer.Exit(serve(agent, history=not no_history))
