"""`acpctl host devices`: the paired devices."""

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("devices")
def devices(as_json: bool = options.JSON) -> None:
    """List the paired devices: name, role, when paired and last seen, push."""
    from acpctl.host import pairing

    raise typer.Exit(pairing.devices(as_json))
