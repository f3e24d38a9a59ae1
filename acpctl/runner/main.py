"""Start-up of `acpctl run --acp`, shared by the typer command and the fast path in
__main__ (editors wait for `initialize`, so the hot path skips typer's import)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from acpctl.errors import AcpctlError, report

if TYPE_CHECKING:
    import subprocess

TTY_HINT = (
    "acpctl run --acp speaks ACP on stdin/stdout and is meant to be launched by an "
    "editor; register it with `acpctl install zed` (or another client)."
)


def parse_fast_args(args: list[str]) -> tuple[str | None, bool] | None:
    """(agent, history) for the plain `run --acp [--agent NAME] [--no-history]` forms;
    None for anything else, which typer then parses."""
    agent: str | None = None
    history = True
    seen_acp = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--acp":
            seen_acp = True
        elif arg == "--no-history":
            history = False
        elif arg in ("--agent", "-a") and rest:
            agent = rest.pop(0)
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
        else:
            return None
    return (agent, history) if seen_acp else None


def serve(agent: str | None, history: bool) -> int:
    """Run the ACP server on stdio until the editor goes away. Returns the exit code."""
    if sys.stdin.isatty():
        sys.stderr.write(f"acpctl: {TTY_HINT}\n")
        return 2

    from acpctl import config, processes
    from acpctl.agents import discovery

    spec = discovery.resolve(config.load(), agent).as_spec()
    argv = [spec.command, *spec.args]
    # Spawn first, import the rest while the agent boots: editors time initialize.
    # (pi-rpc agents are started per session, when session/new arrives.)
    popen: subprocess.Popen[bytes] | None = None
    if spec.kind == "acp":
        with contextlib.suppress(OSError):  # spawned again, and reported, at initialize
            popen = processes.spawn(argv, spec.env)

    from acpctl.runner.connection import run_connection

    run_connection(spec.name, spec.kind, argv, spec.env, popen, history)
    return 0


def fast_main(args: list[str]) -> int | None:
    parsed = parse_fast_args(args)
    if parsed is None:
        return None
    try:
        return serve(*parsed)
    except AcpctlError as exc:
        if os.environ.get("ACPCTL_DEBUG"):
            raise
        return report(exc)
