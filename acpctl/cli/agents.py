"""`acpctl agents`: the catalog (list, update), installs (install, upgrade, uninstall),
configured agents (add, remove, show), the default agent, and which go through the host."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer

from acpctl.agents.limits import DEFAULT_LIMITS, Limits
from acpctl.cli.completions import agent_names, command_line
from acpctl.errors import UsageError

PROBE_TIMEOUT_S = 20.0  # agents add --probe: an npx agent's first start fetches it

if TYPE_CHECKING:
    from rich.console import Console

    from acpctl.agents import discovery
    from acpctl.agents.catalog import CatalogEntry

app = typer.Typer(
    help="Discover, add and remove agents.", no_args_is_help=True, rich_markup_mode=None
)


@app.command("list")
def list_agents(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
    installed_only: bool = typer.Option(
        False, "--installed", help="Only the agents found on this machine."
    ),
    no_probe: bool = typer.Option(False, "--no-probe", help="Skip the version probes."),
    refresh: bool = typer.Option(
        False, "--refresh", help="Probe versions again instead of using the cached ones."
    ),
) -> None:
    """Show every agent of the ACP registry and config.toml: whether it is installed and
    from where (acpctl's own install, PATH, config, npx/uvx), its version against the
    registry's, and how it is distributed. Versions come from an npm agent's package.json,
    else a probe cached until the executable changes."""
    from acpctl import config
    from acpctl.agents import discovery, versions

    cfg = config.load()
    # What this machine has first (configured, installed, the demo), then the catalog.
    agents = sorted(discovery.all_agents(cfg), key=lambda a: not a.found)
    if installed_only:
        agents = [a for a in agents if a.found]
    if not no_probe:
        versions.fill_versions(agents, refresh=refresh)
    default = cfg.default_agent or "demo"
    records = [_record(a, default, cfg.sandbox_for(a.name) is not None) for a in agents]
    if as_json:
        import json

        typer.echo(json.dumps(records, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    from acpctl.terminal.render import rich_console

    console = rich_console()
    if not console.is_terminal or console.width < WIDE_TABLE_COLUMNS:
        _compact(agents, records, default, console)
        return

    table = Table(box=None, header_style="bold")
    for column in ("name", "installed", "version", "registry", "via", "command / about"):
        table.add_column(column)
    for a, record in zip(agents, records, strict=True):
        name = f"{a.name} *" if a.name == default else a.name
        version = a.version or (f"[dim]? ({a.version_error})[/]" if a.version_error else "")
        latest = record["registry_version"] or ""
        if record["update_available"]:
            latest = f"[yellow]{latest} (update available)[/]"
        if a.remote is not None:
            status, detail = "[green]remote[/]", escape(a.remote.address)
        elif a.found and a.argv:
            sandboxed = "[sandbox] " if record["sandbox"] else ""
            status, detail = f"[green]{a.origin}[/]", escape(sandboxed + " ".join(a.argv))
        else:  # installable ones say what they are; the rest how to get them
            about = a.entry.description if a.entry and a.entry.distributions else a.install
            status, detail = "[dim]no[/]", f"[dim]{escape(about or a.reason)}[/]"
        via = ", ".join(record["distributions"])
        table.add_row(name, status, escape(version), latest, via, detail)
    console.print(table)
    typer.echo(
        "* default agent. `acpctl agents install NAME` installs one; "
        "`acpctl agents update` refreshes the registry."
    )


WIDE_TABLE_COLUMNS = 120  # narrower, or on a pipe: the compact list


def _compact(
    agents: list[discovery.ResolvedAgent],
    records: list[dict[str, Any]],
    default: str,
    console: Console,
) -> None:
    """A line for each agent this machine has (where from, its version, an update), then
    the catalog's other agents by name only: the full table is 200 lines at 80 columns."""
    import textwrap

    from rich.markup import escape

    rows = []
    for agent, record in zip(agents, records, strict=True):
        if not agent.found:
            continue
        update = f" ({record['registry_version']} available)" if record["update_available"] else ""
        where = agent.remote.address if agent.remote is not None else " ".join(agent.argv or [])
        where = f"[sandbox] {where}" if record["sandbox"] else where
        name = f"{agent.name} *" if agent.name == default else agent.name
        rows.append((name, agent.origin or "", agent.version or "", update, where))
    name_width = max((len(row[0]) for row in rows), default=0)
    origin_width = max((len(row[1]) for row in rows), default=0)
    version_width = max((len(row[2] + row[3]) for row in rows), default=0)
    for name, origin, version, update, where in rows:
        padding = " " * (version_width - len(version + update))
        console.print(
            f"{escape(name.ljust(name_width))}  [green]{escape(origin.ljust(origin_width))}[/]  "
            f"{escape(version)}[yellow]{escape(update)}[/]{padding}  {escape(where)}".rstrip(),
            soft_wrap=True,
        )
    others = [agent.name for agent in agents if not agent.found]
    if others:
        names = textwrap.fill(
            ", ".join(others),
            width=78,
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        console.print(f"\n[dim]not installed ({len(others)}):\n{escape(names)}[/]", soft_wrap=True)
    typer.echo(
        "\n* default agent. `acpctl agents show NAME` for one, `acpctl agents install NAME`"
        "\nto install one; on a terminal 120 columns wide, the full table (--json: all)."
    )


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


def _record(
    agent: discovery.ResolvedAgent, default: str, sandboxed: bool = False
) -> dict[str, Any]:
    from acpctl.agents import runtimes

    entry = agent.entry
    latest = entry.version if entry else None
    update = None
    if agent.found and agent.version and latest and agent.origin != "builtin":
        update = runtimes.newer(latest, agent.version)
    return {
        "name": agent.name,
        "id": entry.id if entry else None,
        "title": agent.title,
        "kind": agent.kind,
        "command": agent.argv,
        "remote": agent.remote.address if agent.remote else None,
        "found": agent.found,
        "installed_from": agent.origin,
        "version": agent.version,
        "version_error": agent.version_error,
        "registry_version": latest,
        "update_available": update,
        "distributions": sorted(entry.distributions) if entry else [],
        "source": agent.source,
        "default": agent.name == default,
        "sandbox": sandboxed,
        "reason": agent.reason or None,
        "install": agent.install or None,
    }


@app.command("update")
def update(
    origin: str = typer.Option(
        None, "--from", help="A registry URL or file (default: the live ACP registry)."
    ),
    timeout: float = typer.Option(15.0, "--timeout", help="Seconds to wait for the server."),
) -> None:
    """Fetch the ACP registry (only when it changed: ETag / If-Modified-Since) into
    acpctl's data directory; offline or malformed, the copy stays as it was."""
    from acpctl.agents import registry

    result = registry.update(origin, timeout)
    count = len(result.after.get("agents", []))
    if not result.changed:
        typer.echo(f"the registry is up to date ({count} agents, {result.origin})")
        return
    typer.echo(f"registry updated from {result.origin}: {count} agents")
    before = {a.get("id"): a.get("version") for a in result.before.get("agents", [])}
    for agent in result.after.get("agents", []):
        old = before.get(agent.get("id"))
        if agent.get("id") not in before:
            typer.echo(f"  new: {agent.get('id')} {agent.get('version')}")
        elif old != agent.get("version"):
            typer.echo(f"  {agent.get('id')}: {old} -> {agent.get('version')}")


@app.command("install")
def install(
    name: str = typer.Argument(..., help="A catalog agent (acpctl agents list)."),
    version: str = typer.Option(None, "--version", help="Another version than the registry's."),
    via: str = typer.Option(None, "--via", help="npx, uvx or binary (default: binary first)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed off a terminal)."),
    timeout: float = typer.Option(
        DEFAULT_LIMITS.download_s, "--timeout", help="Seconds an archive's whole download may take."
    ),
    max_unpacked: int = typer.Option(
        DEFAULT_LIMITS.unpacked_bytes >> 20, "--max-unpacked", help="MiB an archive may unpack to."
    ),
    max_members: int = typer.Option(
        DEFAULT_LIMITS.members, "--max-members", help="Files and directories an archive may hold."
    ),
    min_rate: int = typer.Option(
        DEFAULT_LIMITS.min_rate,
        "--min-rate",
        help="Bytes a second an archive's download must keep up over each 30 s (0: any).",
    ),
) -> None:
    """Install an agent from the registry into acpctl's own directory: an npm or PyPI
    package, or this platform's archive (checked against the registry's sha256). It then
    resolves before PATH and npx."""
    from acpctl.agents import managed

    if timeout <= 0 or max_unpacked <= 0 or max_members <= 0:
        raise UsageError("--timeout, --max-unpacked and --max-members must be positive")
    if min_rate < 0:
        raise UsageError("--min-rate must be 0 (any) or more")
    limits = Limits(timeout, max_unpacked << 20, max_members, min_rate)
    managed.install(
        _entry(name), version, via, typer.echo, confirmer(yes), _busy_commands(), limits
    )


@app.command("upgrade")
def upgrade(
    name: str = typer.Argument(None, help="An agent acpctl installed."),
    all_agents: bool = typer.Option(False, "--all", help="Every agent acpctl installed."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed off a terminal)."),
) -> None:
    """Install the registry's version of agents acpctl installed, when it is newer (asked
    first, as install asks)."""
    from acpctl.agents import installed, managed

    if (name is None) == (not all_agents):
        raise UsageError("name an agent, or pass --all")
    from acpctl.agents import catalog

    ids = [_entry(name).id] if name else installed.all_ids()
    if not ids:
        typer.echo("acpctl installed no agents yet (acpctl agents install NAME)")
    for agent_id in ids:
        entry = catalog.lookup(agent_id)
        if entry is None:  # an update dropped it from the registry
            typer.echo(f"{agent_id}: no longer in the registry; left as it is")
            continue
        managed.upgrade(entry, typer.echo, confirmer(yes), _busy_commands())


@app.command("uninstall")
def uninstall(name: str = typer.Argument(..., help="An agent acpctl installed.")) -> None:
    """Remove an agent acpctl installed; refused while an editor entry or a live run uses
    it."""
    from acpctl.agents import managed

    entry = _entry(name)
    users = _users(entry.name, entry.id)
    if users:
        ways = []
        if any(" entry " in user for user in users):
            ways.append(f"acpctl uninstall CLIENT --agent {entry.name} removes an editor entry")
        if any(user.startswith("run pid ") for user in users):
            ways.append("end the run first")
        raise UsageError(f"{entry.name} is in use: {'; '.join(users)}", hint="; ".join(ways))
    managed.uninstall(entry, typer.echo)


def confirmer(yes: bool) -> Callable[[str], bool]:
    """Ask on a terminal; off one, only --yes says yes (nothing is installed unasked)."""

    def confirm(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError(f"{question.rstrip('?')}: pass --yes to confirm off a terminal")
        return typer.confirm(question, default=True)

    return confirm


def _entry(name: str) -> CatalogEntry:
    from acpctl.agents import catalog
    from acpctl.agents.discovery import did_you_mean

    entry = catalog.lookup(name)
    if entry is None:
        raise UsageError(
            f"{name!r} is not in the catalog{did_you_mean(name, catalog.entries())}",
            hint="`acpctl agents list` shows every agent",
        )
    return entry


def _busy_commands() -> list[str]:
    """The executables of live runs' agents (their install is not removed under them)."""
    from acpctl.runner.runs import live_runs

    return [str(run["command"][0]) for run in live_runs() if run.get("command")]


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


def _users(*names: str) -> list[str]:
    """Editor entries and live runs that use an agent, said in a few words each."""
    from acpctl.editors import install
    from acpctl.runner.runs import live_runs

    users = [
        f"{record['client']} entry {key!r} ({record['path']})"
        for record in install.list_clients(lambda _: None)
        for key, agent in record["entries"].items()
        if agent in names
    ]
    users += [f"run pid {run['pid']}" for run in live_runs() if run.get("agent") in names]
    return users


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


@app.command("show")
def show(
    name: str = typer.Argument(..., help="Agent name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show how an agent resolves: command, kind, env names, version, and what the
    registry says of it."""
    from acpctl import config
    from acpctl.agents import discovery, versions

    cfg = config.load()
    agent = discovery.resolve(cfg, name)
    versions.fill_versions([agent])
    record = _record(agent, cfg.default_agent or "demo", cfg.sandbox_for(agent.name) is not None)
    if agent.entry is not None:
        record["description"] = agent.entry.description or None
    record["env"] = sorted(agent.env)  # values may be secrets: only the names
    settings = cfg.sandbox_for(agent.name)
    if settings is not None:
        from acpctl import sandbox

        # What its sandbox withholds of this environment, by name (docs/sandbox.md).
        needs = (agent.state_dirs, agent.sandbox_env, agent.env.get("HOME"))
        confined = sandbox.policy(settings, None, *needs)  # the names as a start has them
        record["sandbox_withheld"] = confined.withheld(agent.env)
    entry = agent.entry
    if entry is not None and entry.legacy_args and entry.binaries:
        # e.g. gemini: releases before --acp took --experimental-acp
        record["older_releases"] = " ".join([entry.binaries[0], *entry.legacy_args])
    if as_json:
        import json

        typer.echo(json.dumps(record, indent=2))
        return
    for key, value in record.items():
        if value not in (None, [], "", False):
            shown = " ".join(value) if isinstance(value, list) else value
            typer.echo(f"{key:>16}: {shown}")


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
