"""Start-up of `acpctl run --acp`, shared by the typer command and the fast path in
__main__ (editors wait for `initialize`, so the hot path skips typer's import)."""

from __future__ import annotations

import contextlib
import os
import sys

from acpctl.errors import AcpctlError, UsageError, report

# typing's own import costs 3 ms before the agent is spawned; mypy reads this name as
# typing.TYPE_CHECKING.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from acpctl.config import AgentSpec
    from acpctl.runner.initialize import Exchange

TTY_HINT = (
    "acpctl run --acp speaks ACP on stdin/stdout and is meant to be launched by an "
    "editor; register it with `acpctl install zed` (or another client)."
)


# `acpctl run` options that mean nothing to the ACP server: refused with --acp rather than
# handed to the agent.
TERMINAL_ONLY_OPTIONS = frozenset(
    {
        "--cwd",
        "--session",
        "--continue",
        "-c",
        "--approve-all",
        "--approve-reads",
        "--deny-all",
        "--format",
        "--timeout",
    }
)


class ServeArgs:
    """A plain class: importing dataclasses would cost `run --acp` 10 ms before the agent
    is spawned."""

    def __init__(self) -> None:
        self.agent: str | None = None
        self.history = True
        # Arguments acpctl does not know: the agent's. An editor's terminal-auth method
        # appends them (claude-agent-acp's `--cli`) to run the agent's own login.
        self.agent_args: list[str] = []


def parse_fast_args(args: list[str]) -> ServeArgs | None:
    """The `run --acp` forms; None for anything else (help, or no --acp), which typer
    then parses. Raises UsageError for an option that does not apply with --acp."""
    parsed = ServeArgs()
    seen_acp = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--acp":
            seen_acp = True
        elif arg == "--no-history":
            parsed.history = False
        elif arg in ("--agent", "-a") and rest:
            parsed.agent = rest.pop(0)
        elif arg.startswith("--agent="):
            parsed.agent = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            return None
        elif arg == "--":
            parsed.agent_args += rest
            break
        elif arg.split("=", 1)[0] in TERMINAL_ONLY_OPTIONS:
            raise UsageError(f"{arg.split('=', 1)[0]} does not apply with --acp")
        else:
            parsed.agent_args.append(arg)
    return parsed if seen_acp else None


def login(agent: str | None, agent_args: list[str]) -> int:
    """The agent run with `agent_args` on this terminal, as a terminal-auth method expects:
    an interactive program (its own login), not a relay. Returns its exit status."""
    import signal
    import subprocess

    spec, argv, _ = _resolve(agent)
    # The terminal's Ctrl-C is the agent's to handle; acpctl waits for it to end.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        completed = subprocess.run([*argv, *agent_args], env={**os.environ, **spec.env})
    except OSError as exc:
        raise AcpctlError(f"cannot start agent {argv[0]}: {exc.strerror or exc}") from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    code = completed.returncode
    return 128 - code if code < 0 else code


def serve(agent: str | None, history: bool) -> int:
    """Run the ACP server on stdio until the editor goes away. Returns the exit code."""
    if sys.stdin.isatty():
        sys.stderr.write(f"acpctl: {TTY_HINT}\n")
        return 2

    from acpctl import processes
    from acpctl.runner import spawn_hint

    # Spawn first, import the rest while the agent boots: editors time initialize. The
    # last run's command line goes even before the agent is resolved; it is kept only if
    # resolving gives the same one. (pi-rpc agents are started per session.)
    hinted = spawn_hint.spawn(agent)
    try:
        spec, argv, silence_s = _resolve(agent)
    except BaseException:
        if hinted is not None:
            spawn_hint.discard(hinted[1])
        raise
    wanted = argv if spec.kind == "acp" and not spec.env else None
    popen: subprocess.Popen[bytes] | None = None
    if hinted is not None and hinted[0] == wanted:
        popen = hinted[1]
    else:
        if hinted is not None:
            spawn_hint.discard(hinted[1])
        if spec.kind == "acp":
            with contextlib.suppress(OSError):  # spawned again, and reported, at initialize
                popen = processes.spawn(argv, spec.env)
        spawn_hint.remember(agent, wanted)

    exchanged: Exchange | None = None
    if popen is not None:
        # The server is imported in a thread while the editor's initialize goes to the
        # agent and its answer back (runner/initialize.py).
        from acpctl.runner import initialize

        try:
            exchanged = initialize.exchange(popen, "acpctl.runner.connection")
        except BaseException:  # Ctrl-C: the agent, in a session of its own, goes too
            processes.kill_group(popen.pid)
            raise

    from acpctl.runner.connection import run_connection

    run_connection(spec.name, spec.kind, argv, spec.env, popen, history, silence_s, exchanged)
    return 0


def _resolve(agent: str | None) -> tuple[AgentSpec, list[str], float]:
    """The agent's spec (config.toml, else the catalog, else the demo), its command line,
    and the silence the watchdog allows."""
    from acpctl import config
    from acpctl.agents import discovery

    cfg = config.load()
    spec = discovery.resolve(cfg, agent).as_spec()
    return spec, [spec.command, *spec.args], cfg.silence_warning_s


def fast_main(args: list[str]) -> int | None:
    try:
        parsed = parse_fast_args(args)
        if parsed is None:
            return None
        if parsed.agent_args:
            return login(parsed.agent, parsed.agent_args)
        return serve(parsed.agent, parsed.history)
    except AcpctlError as exc:
        if os.environ.get("ACPCTL_DEBUG"):
            raise
        return report(exc)
