"""`acpctl host revoke NAME`: a device unpaired, its connections ended at once."""

import typer

from acpctl.cli.host.app import app


@app.command("revoke")
def revoke(name: str = typer.Argument(..., help="A paired device's name.")) -> None:
    """Unpair a device: its connections end at once."""
    from acpctl.host import pairing

    raise typer.Exit(pairing.revoke(name))
