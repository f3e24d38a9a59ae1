"""The typer application: one module per command group, each thin (parse, call, print).

Command modules import their heavy dependencies inside the command functions, so
`acpctl --help` and `acpctl agents list --json` load only what they use.
"""

from __future__ import annotations

import os
import sys

import click
import typer
import typer.core

from acpctl import __version__
from acpctl.cli import (
    agents,
    completions,
    doctor,
    history,
    host,
    install,
    ps,
    run,
    serve,
    sessions,
)
from acpctl.cli.completions import COMPLETE_VARIABLE
from acpctl.errors import AcpctlError, report

# Plain help (rich_markup_mode=None, below) still escapes "[required]" for rich when rich is
# installed, printing "\[required]": tell typer's help renderer rich is not there.
typer.core.HAS_RICH = False

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
app.add_typer(agents.app, name="agents")
sessions.app.command("search")(history.search)
sessions.app.command("watch")(history.watch)
app.add_typer(sessions.app, name="sessions")
app.command("run")(run.run)
app.command("ps")(ps.ps)
app.add_typer(host.app, name="host")
app.command("serve", help="The session host's older command: see `acpctl host`.")(serve.serve)
app.command("install")(install.install)
app.command("uninstall")(install.uninstall)
app.command("doctor")(doctor.doctor)
app.command("logs")(doctor.logs)
app.command("usage")(history.usage)
app.command("completions")(completions.completions)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"acpctl {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
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
