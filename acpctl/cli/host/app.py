"""The `acpctl host` command group, which each of its modules adds its verb to."""

import typer

app = typer.Typer(
    help="The session host: start, stop and look at it; pair devices; its tokens.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
