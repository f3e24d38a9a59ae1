"""`acpctl host stop`: the running session host stopped gracefully (its running turns get
its stop grace), or `--now`."""

import typer

from acpctl.cli.host.app import app


@app.command("stop")
def stop(
    now: bool = typer.Option(False, "--now", help="Cancel the running turns at once."),
) -> None:
    """Stop the running session host; its sessions stay in the history."""
    from acpctl.host import asked

    raise typer.Exit(asked.stop(now))
