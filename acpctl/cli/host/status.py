"""`acpctl host status`: the running host's listeners, agents, sessions and clients."""

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("status")
def status(as_json: bool = options.JSON) -> None:
    """Show the running host's listeners, agents, sessions and clients."""
    from acpctl.host import asked

    raise typer.Exit(asked.show_status(as_json))
