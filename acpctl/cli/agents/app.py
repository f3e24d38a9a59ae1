"""The `acpctl agents` command group, which each of its modules adds its commands to."""

import typer

app = typer.Typer(
    help="Discover, add and remove agents.", no_args_is_help=True, rich_markup_mode=None
)
