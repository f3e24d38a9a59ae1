"""`acpctl host rotate-token`: a new token, taken by the running host at once."""

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("rotate-token")
def rotate_token(observer: bool = options.OBSERVER) -> None:
    """A new controller token (--observer: observer); the running host takes it, and its
    connections with the old one end."""
    from acpctl.host import asked

    raise typer.Exit(asked.rotate(observer))
