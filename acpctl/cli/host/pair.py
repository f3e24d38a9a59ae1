"""`acpctl host pair`: a one-time address (and its QR code) that pairs a device's browser."""

from __future__ import annotations

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("pair")
def pair(
    name: str | None = typer.Option(None, "--name", help="The device's name."),
    observer: bool = options.OBSERVER,
    public_url: str | None = typer.Option(
        None,
        "--public-url",
        metavar="URL",
        help="The address the device reaches the host by (a proxy's).",
    ),
    qr_png: str | None = typer.Option(
        None, "--qr-png", metavar="FILE", help="Write the QR code as a PNG too."
    ),
) -> None:
    """Pair a device (a phone's browser): print a one-time address and its QR code."""
    from acpctl.host import pairing

    raise typer.Exit(pairing.pair(observer, name, public_url, qr_png))
