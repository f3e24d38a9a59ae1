"""The typer application: one module per command group, each thin (parse, call, print).

A start builds only the command it runs (COMMANDS says where each lives): typer turns
every registered function into a click command before it parses anything, which for the
whole tree costs more than the rest of a short command's start. Help, completion and a
mistyped name get every command. Command modules import their heavy dependencies inside
the command functions, so `acpctl agents list --json` loads only what it uses.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

import click
import typer
import typer.core

from acpctl import __version__
from acpctl.cli.completions import COMPLETE_VARIABLE
from acpctl.errors import AcpctlError, report

# Plain help (rich_markup_mode=None, below) still escapes "[required]" for rich when rich is
# installed, printing "\[required]": tell typer's help renderer rich is not there.
typer.core.HAS_RICH = False


@dataclass(frozen=True)
class Command:
    """Where a top-level command lives: a function, or a group's typer app (`app`)."""

    module: str
    attribute: str
    help: str | None = None

    def add_to(self, app: typer.Typer, name: str) -> None:
        found = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(found, typer.Typer):
            app.add_typer(found, name=name)
        else:
            app.command(name, help=self.help)(found)


COMMANDS = {
    "agents": Command("acpctl.cli.agents", "app"),
    "sessions": Command("acpctl.cli.sessions", "app"),
    "run": Command("acpctl.cli.run", "run"),
    "ps": Command("acpctl.cli.ps", "ps"),
    "host": Command("acpctl.cli.host", "app"),
    "serve": Command(
        "acpctl.cli.serve", "serve", help="The session host's older command: see `acpctl host`."
    ),
    "install": Command("acpctl.cli.install", "install"),
    "uninstall": Command("acpctl.cli.install", "uninstall"),
    "doctor": Command("acpctl.cli.doctor", "doctor"),
    "logs": Command("acpctl.cli.doctor", "logs"),
    "usage": Command("acpctl.cli.history", "usage"),
    "completions": Command("acpctl.cli.completions", "completions"),
}


def application(argv: list[str] | None = None) -> typer.Typer:
    """The application with the command `argv` runs; with every command when `argv` is
    None or names none (the root's help, a mistyped name) or a shell asks completions."""
    named = argv[0] if argv and COMPLETE_VARIABLE not in os.environ else None
    names = [named] if named in COMMANDS else list(COMMANDS)
    app = typer.Typer(
        name="acpctl",
        context_settings={"help_option_names": ["-h", "--help"]},
        help="Wire ACP coding agents into editors, run them supervised, keep their history.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain help: rich's help renderer alone costs more start-up time than all the rest.
        rich_markup_mode=None,
        # click suggests a close command itself; typer's own suggestion printed it twice.
        suggest_commands=False,
    )
    # The callback keeps the root a group when it has one command.
    app.callback()(_root)
    for name in names:
        COMMANDS[name].add_to(app, name)
    return app


def _version(value: bool) -> None:
    if value:
        typer.echo(f"acpctl {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """acpctl: ACP agents for every editor."""


def main(argv: list[str]) -> int:
    """Run acpctl's command line on `argv`; returns the exit code (the tests call this
    in-process, as `__main__` does for a real start)."""
    if COMPLETE_VARIABLE in os.environ:
        # A shell asking for completions (see completions.py): typer's own formats.
        from typer._completion_classes import completion_init

        completion_init()
    try:
        # Not standalone: click returns an Exit's code rather than exiting.
        app = application(argv)
        code = app(args=argv, prog_name="acpctl", standalone_mode=False, obj=list(argv))
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except AcpctlError as exc:
        if os.environ.get("ACPCTL_DEBUG"):
            raise
        return report(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `acpctl sessions show ID | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):  # typer exits 1 on a closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        raise
    except OSError as exc:  # a file the user named cannot be read or written
        if os.environ.get("ACPCTL_DEBUG"):
            raise
        where = f": {exc.filename}" if exc.filename else ""
        return report(AcpctlError(f"{exc.strerror or exc}{where}"))
    return code if isinstance(code, int) else 0


def run_app() -> None:
    sys.exit(main(sys.argv[1:]))
