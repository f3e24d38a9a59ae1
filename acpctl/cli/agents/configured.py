"""`acpctl agents add`, `remove`, `default`, `host` and `sandbox`: the agents config.toml
configures, and how each runs."""

from __future__ import annotations

from pathlib import Path

import click
import typer

from acpctl.cli.agents.app import app
from acpctl.cli.completions import agent_names, command_line
from acpctl.errors import UsageError

PROBE_TIMEOUT_S = 20.0  # agents add --probe: an npx agent's first start fetches it


REMOTE_SANDBOX = (
    "a remote agent is sandboxed by the session host of the machine it runs on, not "
    "here: set its sandbox on that machine (acpctl agents sandbox NAME on)"
)


@app.command("sandbox")
def sandbox(
    name: str = typer.Argument(..., help="An agent.", autocompletion=agent_names),
    state: str = typer.Argument(
        ..., click_type=click.Choice(["on", "off"]), help="on or off.", show_default=False
    ),
) -> None:
    """Run an agent in a sandbox (bubblewrap): it may write only the project it is started
    for, its own state directories and a private /tmp; its home's secret stores are
    hidden (docs/sandbox.md)."""
    from acpctl import config
    from acpctl.agents import discovery

    cfg = config.load()
    agent = discovery.resolve(cfg, name)  # an unknown name is refused here
    if agent.remote is not None:
        raise UsageError(REMOTE_SANDBOX)
    config.set_sandbox(cfg, agent.name, state == "on")
    config.save(cfg)
    _say_sandbox(agent.name, state == "on")


def _absolute(command: list[str]) -> list[str]:
    """The command with the relative paths that name a file here made absolute: a program
    (./agent.sh) or an argument (python my_agent.py). An editor starts the agent in its
    project, where they would name nothing. A path that names no file here is kept as
    given: relative to the project an editor starts the agent in (tools/agent)."""
    import os

    return [
        os.path.abspath(word)
        if not os.path.isabs(word)
        and not word.startswith("-")
        and (os.sep in word or index > 0)
        and os.path.isfile(word)
        else word
        for index, word in enumerate(command)
    ]


def _say_sandbox(name: str, on: bool) -> None:
    from acpctl import sandbox

    if not on:
        typer.echo(f"{name}: runs without a sandbox (from its next start)")
        return
    typer.echo(f"{name}: runs in a sandbox from its next start; it writes only its project")
    problem = sandbox.engine_problem()
    if problem is not None:
        typer.echo(f"acpctl: warning: {problem}; until then {name} does not start", err=True)
    in_tmp = sandbox.home_in_tmp()
    if in_tmp is not None:
        typer.echo(f"acpctl: warning: {in_tmp}", err=True)


def _add_remote(
    name: str,
    has_command: bool,
    url: str | None,
    token_file: str | None,
    ca_file: str | None,
    ssh: str | None,
    remote_agent: str | None,
    remote_acpctl: str | None,
) -> None:
    """A remote agent checked as config.toml's reader checks it, then written."""
    from acpctl import config
    from acpctl.config import AgentSpec

    if has_command or (url is not None and ssh is not None):
        raise UsageError("a remote agent takes one of --url and --ssh, and no command")
    if url is None and (token_file or ca_file):
        raise UsageError("--token-file and --ca-file go with --url")
    if ssh is None and (remote_agent or remote_acpctl):
        raise UsageError("--remote-agent and --remote-acpctl go with --ssh")
    for path in (token_file, ca_file):
        if path is not None and not Path(path).expanduser().is_file():
            raise UsageError(f"{path} is not a file")
    absolute = {
        k: str(Path(v).expanduser().resolve()) if v else None
        for k, v in (("token_file", token_file), ("ca_file", ca_file))
    }
    cfg = config.load()
    table = {"url": url, "ssh": ssh, "remote_agent": remote_agent, **absolute}
    if remote_acpctl:
        table["remote_acpctl"] = remote_acpctl
    # Checked as config.toml's reader checks it (what is written reads back), and for what
    # `run` would refuse: a token in clear text off this machine.
    remote = config.remote_from_table(None, name, {k: v for k, v in table.items() if v})
    if url is not None and (problem := config.clear_text_problem(url)):
        raise UsageError(problem)
    replaced = name in cfg.agents
    config.set_agent(cfg, AgentSpec(name, "", (), {}, "acp", remote))
    config.save(cfg)
    typer.echo(
        f"{'updated' if replaced else 'added'} remote agent {name} ({remote.address}) in {cfg.path}"
    )


@app.command("add", context_settings={"ignore_unknown_options": True})
def add(
    name: str = typer.Argument(..., help="Name to use in acpctl and editors."),
    command: list[str] = typer.Argument(None, help="The agent's command line, after --."),
    kind: str = typer.Option("acp", "--kind", help="acp (native ACP) or pi-rpc."),
    env: list[str] = typer.Option([], "--env", help="K=V, may repeat."),
    url: str | None = typer.Option(
        None, "--url", help="A remote agent: wss://HOST:PORT/acp[/AGENT] (or https://)."
    ),
    token_file: str | None = typer.Option(
        None, "--token-file", help="With --url: a file holding the bearer token."
    ),
    ca_file: str | None = typer.Option(
        None, "--ca-file", help="With --url: trust only this CA (PEM) for its certificate."
    ),
    ssh: str | None = typer.Option(
        None, "--ssh", metavar="[USER@]HOST", help="A remote agent over ssh (acpctl there)."
    ),
    remote_agent: str | None = typer.Option(
        None, "--remote-agent", help="With --ssh: the agent's name on the remote."
    ),
    remote_acpctl: str | None = typer.Option(
        None, "--remote-acpctl", help="With --ssh: how to run acpctl there (default: acpctl)."
    ),
    sandbox: bool = typer.Option(
        False, "--sandbox", help="Run it in a sandbox: it writes only its project (bubblewrap)."
    ),
    probe: bool = typer.Option(
        False, "--probe", help="Start it once and say which ACP versions it speaks."
    ),
) -> None:
    """Add (or replace) an agent in config.toml: acpctl agents add NAME -- CMD [ARGS...],
    or a remote one: --url URL or --ssh HOST."""
    from acpctl import config
    from acpctl.config import AGENT_KINDS, AgentSpec

    if kind not in AGENT_KINDS:
        raise UsageError(f"--kind must be one of {', '.join(AGENT_KINDS)}, not {kind!r}")
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError(f"agent name {name!r} may use only letters, digits, '-', '_' and '.'")
    if url is not None or ssh is not None:
        if sandbox:
            raise UsageError(REMOTE_SANDBOX)
        _add_remote(name, bool(command), url, token_file, ca_file, ssh, remote_agent, remote_acpctl)
        return
    pairs = _checked_command(command, env)
    from acpctl.agents import discovery

    cfg = config.load()
    replaced = name in cfg.agents
    command = _absolute(command)
    spec = AgentSpec(name, command[0], tuple(command[1:]), pairs, kind)
    config.set_agent(cfg, spec, sandbox=sandbox)
    config.save(cfg)
    typer.echo(f"{'updated' if replaced else 'added'} agent {name} in {cfg.path}")
    if sandbox:
        _say_sandbox(name, True)
    if discovery.which(command[0]) is None:
        typer.echo(
            f"acpctl: warning: {command[0]} is not found (on PATH, beside acpctl, or as a "
            "path): install it before an editor starts the agent",
            err=True,
        )
    elif probe and kind == "acp":
        _say_versions(name)


def _checked_command(command: list[str], env: list[str]) -> dict[str, str]:
    """A local agent's command line checked, and its --env pairs."""
    if not command:
        raise UsageError("give the agent's command after --, or --url or --ssh for a remote one")
    argv = command_line()
    if "--" in argv:  # `agents add bad name -- x` would store "name" as the command
        after = argv[argv.index("--") + 1 :]
        if list(command) != after:
            stray = " ".join(command[: len(command) - len(after)])
            raise UsageError(
                f"{stray!r} stands between the name and --: an agent name is one word of "
                "letters, digits, '-', '_' and '.' (acpctl agents add NAME -- COMMAND ...)"
            )
    pairs: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes KEY=VALUE, not {item!r}")
        pairs[key] = value
    return pairs


def _say_versions(name: str) -> None:
    """Which ACP versions the agent just added speaks: it is asked for v1 and for v2 (in
    its sandbox, when it has one), as doctor asks."""
    import asyncio

    from acpctl import config
    from acpctl.agents import discovery
    from acpctl.doctor import probe
    from acpctl.doctor.checks.agents import confinement

    cfg = config.load()
    agent = discovery.resolve(cfg, name)
    assert agent.argv is not None
    v1, v2 = asyncio.run(
        probe.probe_versions(agent.argv, agent.env, PROBE_TIMEOUT_S, confinement(cfg, agent))
    )
    spoken = probe.speaks(v1, v2)
    if spoken is None:
        typer.echo(f"acpctl: warning: {name} did not answer initialize: {v1.error}", err=True)
    elif not v1.answered or probe.refused_version(v1) is not None:
        typer.echo(f"acpctl: warning: {name} speaks {spoken}: acpctl speaks ACP v1", err=True)
    else:
        typer.echo(f"{name} speaks {spoken}")


@app.command("remove")
def remove(name: str = typer.Argument(..., help="A configured agent.")) -> None:
    """Remove an agent from config.toml."""
    from acpctl import config

    cfg = config.load()
    if name not in cfg.agents:
        configured = ", ".join(sorted(cfg.agents)) or "none"
        raise UsageError(f"agent {name!r} is not in {cfg.path} (configured: {configured})")
    config.remove_agent(cfg, name)
    config.save(cfg)
    typer.echo(f"removed agent {name} from {cfg.path}")


@app.command("default")
def default(name: str = typer.Argument(..., help="Agent name.")) -> None:
    """Make NAME the default agent for `acpctl run` and `acpctl install`."""
    from acpctl import config
    from acpctl.agents import discovery

    cfg = config.load()
    discovery.resolve(cfg, name)  # an unknown name exits 2 with the known names
    config.set_default_agent(cfg, name)
    config.save(cfg)
    typer.echo(f"default agent is now {name}")


@app.command("host")
def host(
    state: str = typer.Argument(
        ..., click_type=click.Choice(["on", "off"]), help="on or off.", show_default=False
    ),
    name: str = typer.Argument(
        None,
        help="Only this agent of config.toml (default: every agent).",
        show_default=False,
        autocompletion=agent_names,
    ),
) -> None:
    """Run editors' sessions through the session host (config.toml's host = true): they
    outlive the editor, and a terminal can attach to them."""
    from acpctl import config

    cfg = config.load()
    if name is not None and name not in cfg.agents:
        raise UsageError(
            f"{name!r} is not an agent of {cfg.path}",
            hint="without a name it applies to every agent",
        )
    config.set_through_host(cfg, state == "on", name)
    config.save(cfg)
    who = name or "every agent"
    way = "through the session host" if state == "on" else "directly, without the host"
    typer.echo(f"{who}: editors' sessions now run {way} (from the next `acpctl run --acp`)")
    typer.echo(_running_host_said(state == "on"))


def _running_host_said(on: bool) -> str:
    """What the change does to a session host that runs now: nothing, said."""
    import asyncio

    from acpctl.remote.host_socket import read_status

    running = asyncio.run(read_status())
    if running is None:
        return (
            "no session host runs now: the next editor's `run --acp` starts one"
            if on
            else "no session host runs now"
        )
    pid = running["pid"]
    if on:
        return f"the session host (pid {pid}) runs: the next sessions go through it"
    return (
        f"the session host (pid {pid}) keeps running for the sessions it holds; "
        "`acpctl host stop` stops it"
    )
