"""`acpctl run`: with --acp, the ACP server an editor launches."""

from __future__ import annotations

import sys

import typer

from acpctl.errors import UsageError

TTY_HINT = ("acpctl run --acp speaks ACP on stdin/stdout and is meant to be launched by an "
            "editor; register it with `acpctl install zed` (or another client).")


def run(
    acp_mode: bool = typer.Option(False, "--acp", help="Serve ACP on stdio (for editors)."),
    agent: str = typer.Option(None, "--agent", "-a", help="Agent name (default: configured "
                              "default, else the built-in demo)."),
) -> None:
    """Run an agent. With --acp: the supervised ACP relay an editor launches."""
    if not acp_mode:
        raise UsageError("only `acpctl run --acp` is available in this version",
                         hint=TTY_HINT)
    if sys.stdin.isatty():
        print(f"acpctl: {TTY_HINT}", file=sys.stderr)
        raise typer.Exit(2)
    import asyncio

    from acpctl import config
    from acpctl.agents import discovery
    from acpctl.runner.runlog import RunRecord, open_log
    from acpctl.runner.server import run_server
    from acpctl.store.sessions import SessionStore

    resolved = discovery.resolve(config.load(), agent)
    spec = resolved.as_spec()
    if spec.kind != "acp":
        raise UsageError(f"agent {spec.name!r} has kind {spec.kind!r}; this version relays "
                         "native ACP agents only")
    argv = [spec.command, *spec.args]
    log, log_path = open_log(spec.name)
    log.info("acpctl run --acp: agent %s (%s), log %s", spec.name, " ".join(argv), log_path)
    record = RunRecord(spec.name, argv, log_path)
    try:
        asyncio.run(run_server(spec.name, argv, spec.env, log, record, SessionStore()))
    finally:
        record.remove()
