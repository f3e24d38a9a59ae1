"""Start-up of `acpctl run --acp`, shared by the typer command and the fast path in
__main__ (editors time `initialize`, so the common case skips typer's import).

One path: the agent is resolved from the configuration as it is now, in the editor's
working directory, and only then spawned. Nothing from an earlier run decides what runs.
A native agent is spawned as soon as it is resolved, before the server is imported, so
that its start-up and acpctl's overlap (pi-rpc agents are started per session).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

from acpctl.errors import AcpctlError, report
from acpctl.runner.options import RunLimits, parse_serve_args

if TYPE_CHECKING:
    from acpctl.config import AgentSpec
    from acpctl.sandbox import Policy


class Resolved(NamedTuple):
    spec: AgentSpec
    argv: list[str]
    limits: RunLimits
    through_host: bool  # config.toml's host = true for this agent
    sandbox: Policy | None  # the sandbox it runs in (argv runs it there)
    env: dict[str, str]  # what it is started with: its config's, or a sandbox's whole one


TTY_HINT = (
    "acpctl run --acp speaks ACP on stdin/stdout and is meant to be launched by an "
    "editor; register it with `acpctl install zed` (or another client)."
)


def login(agent: str | None, agent_args: list[str]) -> int:
    """The agent run with `agent_args` on this terminal, as a terminal-auth method expects:
    an interactive program (its own login), not a relay. Returns its exit status."""
    import signal
    import subprocess

    from acpctl import processes

    resolved = resolve(agent)
    spec, argv, env = resolved.spec, resolved.argv, resolved.env
    if spec.remote is not None:
        raise AcpctlError(
            f"agent {spec.name} is remote ({spec.remote.address}): sign in on that machine"
        )
    if resolved.sandbox is not None and spec.kind == "pi-rpc":
        from acpctl import sandbox

        argv, env = sandbox.launch(resolved.sandbox, argv, spec.env)
    # The terminal's Ctrl-C is the agent's to handle; acpctl waits for it to end.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        completed = subprocess.run([*argv, *agent_args], env=processes.environment(env))
    except OSError as exc:
        raise AcpctlError(f"cannot start agent {argv[0]}: {exc.strerror or exc}") from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    code = completed.returncode
    return 128 - code if code < 0 else code


def serve(agent: str | None, history: bool, through_host: bool = False) -> int:
    """Run the ACP server on stdio until the editor goes away. Returns the exit code.
    `through_host`: through the session host whatever config.toml says, never directly."""
    if sys.stdin.isatty():
        sys.stderr.write(f"acpctl: {TTY_HINT}\n")
        return 2
    from acpctl import processes

    spec, argv, limits, configured_host, policy, env = resolve(agent)
    if spec.remote is not None:
        from acpctl.remote.relay import relay_remote
        from acpctl.runner.remote_history import RemoteHistory
        from acpctl.runner.runlog import open_log
        from acpctl.runner.runs import RunRecord
        from acpctl.store.sessions import SessionStore

        log, log_path = open_log(spec.name, "acpctl.remote")
        # `acpctl ps` lists the link as a run, with the sessions it holds open.
        record = RunRecord(spec.name, ["remote", spec.remote.address], log_path)
        address, name = spec.remote.address, spec.name

        def remote_history() -> RemoteHistory:  # what the link relays, recorded here too
            return RemoteHistory(SessionStore(), name, address, log)

        try:
            return relay_remote(
                spec.remote,
                log,
                lambda ids: record.update(sessions=ids),
                remote_history if history else None,
            )
        finally:
            record.remove()
    if through_host or configured_host:
        from acpctl.remote.relay import relay_local

        if not history:
            if through_host:
                raise AcpctlError("--no-history is not served through the session host")
            sys.stderr.write(
                "acpctl: --no-history is not served through the session host; serving directly\n"
            )
        else:
            code = relay_local(spec.name, limits.outage_limit_s, fallback=not through_host)
            if code is not None:
                return code
            # None: the host cannot serve this agent as resolved here; served directly.
    spawned = None
    if spec.kind == "acp":
        with contextlib.suppress(OSError):  # tried again, and reported, at initialize
            spawned = processes.spawn(argv, env)
    try:
        from acpctl.runner.connection import serve_stdio

        serve_stdio(spec.name, spec.kind, argv, env, history, limits, spawned, policy)
    finally:  # the server ends the agent it adopted; one it never adopted goes here
        if spawned is not None and spawned.poll() is None:
            processes.kill_group(spawned.pid)
    return 0


def resolve(agent: str | None, start_dir: str | None = None, remote: bool = False) -> Resolved:
    """The agent's spec (config.toml, else the catalog, else the demo), its command line,
    the limits config.toml sets for its connection, and whether it goes through the host.
    A sandboxed agent's command line runs it in its sandbox, whose first root is
    `start_dir` (default: this process's directory, the editor's project; for a `remote`
    client, config.toml's roots alone), with its environment by allow-list; raises
    SandboxUnavailable when no sandbox can start here (it is never run unconfined)."""
    from acpctl import config
    from acpctl.agents import discovery

    cfg = config.load()
    resolved = discovery.resolve(cfg, agent)
    spec = resolved.as_spec()
    argv = [spec.command, *spec.args]
    settings = cfg.sandbox_for(spec.name) if spec.remote is None else None
    policy = None
    env = spec.env
    if settings is not None:
        from acpctl import sandbox

        start = None if remote else start_dir or os.getcwd()
        policy = sandbox.for_agent(
            settings, resolved.state_dirs, start, resolved.sandbox_env, spec.env.get("HOME")
        )
        assert policy is not None
        if spec.kind != "pi-rpc":  # pi's backend runs each session's pi in it (runner/backends/pi)
            argv, env = sandbox.launch(policy, argv, spec.env)
    return Resolved(
        spec,
        argv,
        RunLimits(cfg.silence_warning_s, cfg.request_timeout_s, cfg.outage_limit_s),
        cfg.through_host(spec.name),
        policy,
        env,
    )


def fast_main(args: list[str]) -> int | None:
    """`acpctl run ARGS` when ARGS are a `run --acp` form; None leaves them to typer."""
    try:
        parsed = parse_serve_args(args)
        if parsed is None:
            return None
        if parsed.agent_args:
            return login(parsed.agent, parsed.agent_args)
        return serve(parsed.agent, parsed.history, parsed.through_host)
    except AcpctlError as exc:
        if os.environ.get("ACPCTL_DEBUG"):
            raise
        return report(exc)
