"""`acpctl host show-token`: the token a remote client needs."""

from __future__ import annotations

from pathlib import Path

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("show-token")
def show_token(
    observer: bool = options.OBSERVER,
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Write the token to this file, readable by you alone."
    ),
) -> None:
    """Print the controller token (--observer: the one that can only watch)."""
    from acpctl.host import asked

    raise typer.Exit(asked.show_token(observer, token_file))
