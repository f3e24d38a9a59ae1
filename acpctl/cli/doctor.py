"""`acpctl doctor` and `acpctl logs`."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from acpctl.cli.completions import agent_names, agent_option
from acpctl.errors import UsageError

if TYPE_CHECKING:
    from acpctl import config
    from acpctl.doctor.findings import Finding


def doctor(
    agent: str = agent_option(None, "Check only this agent."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    fix: bool = typer.Option(False, "--fix", help="End orphaned agent processes."),
    timeout: float = typer.Option(
        None, "--timeout", help="Seconds each probe may take (15), each step of --prompt (60)."
    ),
    prompt: bool = typer.Option(
        False,
        "--prompt",
        help="Also send the agent (--agent, else the default) one tiny prompt through "
        "acpctl and time it. It may cost tokens.",
    ),
    catalog: bool = typer.Option(
        False,
        "--catalog",
        help="Also ask npm for every release the registry names (those it lacks cannot "
        "be installed).",
    ),
) -> None:
    """Find what is wrong with acpctl, its agents and editors, and say how to fix it.

    Exit status: 0 without problems, 1 with problems, 2 on usage errors.
    """
    from acpctl.doctor import checks

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            return True  # --fix without a terminal: the flag is the consent
        return typer.confirm(question, default=False)

    findings = checks.check_install()
    findings += checks.check_runtimes()
    config_findings, cfg = checks.check_config()
    findings += config_findings
    if cfg is not None:
        from acpctl.terminal.render import status

        with status("probing the agents..."):
            findings += checks.check_agents(cfg, agent, timeout or PROBE_TIMEOUT_S)
        if prompt:
            findings += _turn(cfg, agent, timeout or TURN_TIMEOUT_S)
        findings += checks.check_editors(cfg)
        findings += checks.check_sandbox(cfg)
    findings += checks.check_storage()
    findings += checks.check_processes(fix, confirm)
    findings += checks.check_host()
    if cfg is not None:
        findings += checks.check_reach(cfg)
    findings += checks.check_incidents()
    findings += checks.check_logs()
    if catalog:
        from acpctl.doctor.checks.catalog import check_catalog

        findings += check_catalog()
    problems = sum(f.status == "problem" for f in findings)
    if as_json:
        import json

        typer.echo(json.dumps([f.as_json() for f in findings], indent=2))
    else:
        _report(findings)
    raise typer.Exit(1 if problems else 0)


def _pid_of(log: Path) -> int | None:
    """The pid of the run a log belongs to, from its name: <agent>-<time>-<pid>.log."""
    pid = log.stem.rsplit("-", 1)[-1]
    return int(pid) if pid.isdigit() else None


PROBE_TIMEOUT_S = 15.0
TURN_TIMEOUT_S = 60.0  # claude-agent-acp takes 5-10 s for session/new alone


def _turn(cfg: config.Config, name: str | None, timeout: float) -> list[Finding]:
    from acpctl.agents import discovery
    from acpctl.doctor.turn import check_turn
    from acpctl.terminal.render import status

    target = discovery.resolve(cfg, name)
    if not target.found:
        return []  # the agent checks said why
    with status(f"a prompt to {target.name}..."):
        return check_turn(target, timeout)


def _report(findings: list[Finding]) -> None:
    from rich.markup import escape

    from acpctl.terminal.render import rich_console

    console = rich_console()
    # On a terminal, lines wrap at its width; on a pipe, each stays whole (for grep, a
    # file, an issue report), whatever width rich would guess.
    whole = not console.is_terminal

    def say(text: str) -> None:
        console.print(text, soft_wrap=whole)

    marks = {"ok": "[green]✓[/]", "warning": "[yellow]![/]", "problem": "[red]✗[/]"}
    # One section per check (an agent's install and probe findings come from two passes).
    sections: dict[str, list[Finding]] = {}
    for finding in findings:
        sections.setdefault(finding.check, []).append(finding)
    for check, section in sections.items():
        say(f"\n[bold]{escape(check)}[/]")
        for finding in section:
            say(f"  {marks[finding.status]} {escape(finding.message)}")
            for line in finding.evidence:
                say(f"      [dim]{escape(line)}[/]")
            if finding.fix and finding.status != "ok":
                say(f"      [cyan]fix:[/] {escape(finding.fix)}")
    counts = {s: sum(f.status == s for f in findings) for s in ("problem", "warning")}
    say(f"\n{counts['problem']} problem(s), {counts['warning']} warning(s)")


def _print_incidents(log: Path) -> None:
    """The run's failed requests and silences, after its log: what the agent answered."""
    from acpctl.runner import incidents

    records = [r for r in incidents.read(incidents.path_for(log)) if r["kind"] != "worked"]
    if records:
        typer.echo(f"==> {incidents.path_for(log)}: failed requests and silences <==", err=True)
        for record in records[-20:]:
            typer.echo(incidents.describe(record))


def logs(
    name: str = typer.Argument(
        None,
        metavar="[AGENT]",
        help="Logs of this agent's runs (as --agent; `serve`: the session host's).",
        show_default=False,
        autocompletion=agent_names,
    ),
    agent: str = agent_option(None, "Logs of this agent's runs."),
    run: int = typer.Option(None, "--run", help="The log of the run with this pid."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new lines."),
    lines: int = typer.Option(50, "-n", "--lines", help="How many lines to print."),
    list_: bool = typer.Option(False, "--list", help="List the log files instead."),
    as_json: bool = typer.Option(False, "--json", help="With --list: a JSON array."),
) -> None:
    """Print (or follow) the logs of `acpctl run`: acpctl's own lines and agent stderr."""
    from acpctl import paths
    from acpctl.runner.runlog import agent_of, run_logs

    if name and agent and name != agent:
        raise UsageError(f"two agents named: {name} and --agent {agent}")
    agent = agent or name
    files = run_logs()
    if agent:
        files = [p for p in files if agent_of(p) == agent]
    if run is not None:
        files = [p for p in files if p.stem.endswith(f"-{run}")]
    if as_json and not list_:
        raise UsageError("--json goes with --list")
    if list_:
        if as_json:
            import json

            listed = [
                {
                    "path": str(path),
                    "agent": agent_of(path),
                    "pid": _pid_of(path),
                    "modified": path.stat().st_mtime,
                    "bytes": path.stat().st_size,
                }
                for path in reversed(files)  # the newest first, as the listing shows them
            ]
            typer.echo(json.dumps(listed, indent=2))
            return
        for path in reversed(files):  # the newest first: the one wanted is at the top
            typer.echo(
                f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(path.stat().st_mtime))}  {path}"
            )
        return
    if not files:
        every = sorted(paths.logs_dir().glob("*.log"))
        if every:  # logs exist, just none of this run or agent
            raise UsageError(
                f"no log of {'the run with pid ' + str(run) if run is not None else agent} "
                f"among the {len(every)} in {paths.logs_dir()}",
                hint="`acpctl logs --list` lists them",
            )
        raise UsageError(
            f"no run logs yet in {paths.logs_dir()}",
            hint="logs appear once an editor or `acpctl run` starts an agent",
        )
    path = files[-1]
    typer.echo(f"==> {path} <==", err=True)
    with path.open(encoding="utf-8", errors="replace") as handle:
        tail = handle.readlines()[-lines:] if lines > 0 else []
        sys.stdout.writelines(tail)
        sys.stdout.flush()
        _print_incidents(path)
        while follow:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
