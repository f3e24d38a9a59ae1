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
    from acpctl.config import AgentSpec
    from acpctl.runner.initialize import Exchange
    from acpctl.runner.spawn_hint import Hint

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
    # last run's agent goes even before anything is resolved; when nothing it was resolved
    # from has changed, nothing is (runner/spawn_hint.py). (pi-rpc agents are started per
    # session.)
    inputs = spawn_hint.resolution_inputs()
    hint = spawn_hint.read(agent)
    popen = spawn_hint.spawn(hint) if hint is not None else None
    trusted = hint if hint is not None and popen is not None and hint.inputs == inputs else None
    if trusted is not None:
        name, kind, argv, env = trusted.name, "acp", trusted.argv, {}
        silence_s = trusted.silence_s
    else:
        try:
            spec, argv, silence_s = _resolve(agent)
        except BaseException:
            if popen is not None:
                spawn_hint.discard(popen)
            raise
        name, kind, env = spec.name, spec.kind, spec.env
        resolved = _hint_for(spec, argv, silence_s, inputs)
        if popen is not None and not (resolved and hint and resolved.argv == hint.argv):
            spawn_hint.discard(popen)
            popen = None
        if popen is None and kind == "acp":
            with contextlib.suppress(OSError):  # spawned again, and reported, at initialize
                popen = processes.spawn(argv, env)
        spawn_hint.remember(agent, resolved)

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

    hinted = trusted is not None
    run_connection(name, kind, argv, env, popen, history, silence_s, exchanged, hinted)
    if hinted:
        _check_hint(agent)
    return 0


def _hint_for(
    spec: AgentSpec, argv: list[str], silence_s: float, inputs: list[object]
) -> Hint | None:
    """What the next start under this name may spawn early: None for an agent with env of
    its own (not copied out of config.toml) and for pi-rpc agents (started per session)."""
    from acpctl.runner.spawn_hint import Hint

    if spec.kind != "acp" or spec.env:
        return None
    return Hint(spec.name, argv, silence_s, inputs)


def _check_hint(agent: str | None) -> None:
    """The agent of a run started from its hint, resolved again now that the editor has
    gone (off every path an editor waits on): a change its inputs did not show costs one
    run, not every run."""
    from acpctl.runner import spawn_hint

    inputs = spawn_hint.resolution_inputs()
    try:
        spec, argv, silence_s = _resolve(agent)
    except AcpctlError:
        spawn_hint.remember(agent, None)
        return
    spawn_hint.remember(agent, _hint_for(spec, argv, silence_s, inputs))


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
