"""`acpctl ps`: live `acpctl run` processes, and the session host's agents."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from acpctl.remote.fleet import Answer


def ps(as_json: bool = typer.Option(False, "--json", help="Print a JSON array.")) -> None:
    """List live acpctl runs and the session host's agents: pid, agent, uptime, memory
    (agent tree included), sessions, and a sandboxed agent's roots; and the linked hosts'
    live sessions (`acpctl host link`)."""
    import asyncio

    from acpctl.remote.host_socket import read_status
    from acpctl.runner import runs

    live = runs.live_runs()
    status = asyncio.run(read_status())
    for agent in status["agents"] if status else []:
        live.append(
            {
                # The agent's own process (the one that works, and uses the memory); the
                # host that holds it beside.
                "pid": agent["agentPid"],
                "hostPid": status["pid"] if status else None,
                "agent": agent["agent"],
                "host": True,
                "spare": agent["spare"],
                "sandbox": agent.get("sandbox"),
                "started": agent["started"],
                "agentPid": agent["agentPid"],
                "rss": agent["rss"] or 0,
                "clients": agent["clients"],
                "sessions": [s["sessionId"] for s in agent["sessions"]],
                "notRespondingSince": agent.get("notRespondingSince"),
            }
        )
    from acpctl.cli import linked

    answers = linked.asked()
    live += _linked_runs(answers)
    if as_json:
        import json

        typer.echo(json.dumps(live, indent=2))
        for answer in answers:
            if answer.result is None:
                typer.echo(f"acpctl: {linked.unreachable(answer)}", err=True)
        return
    if not live and not answers:
        typer.echo("no acpctl runs are live, and no session host runs agents")
        return
    typer.echo(f"{'PID':>7}  {'AGENT':<14} {'UPTIME':>8} {'RSS':>9}  SESSIONS")
    for run in live:
        typer.echo(_row(run))
    for answer in answers:
        if answer.result is None:
            typer.echo(linked.unreachable(answer))


def _linked_runs(answers: list[Answer]) -> list[dict[str, Any]]:
    """A linked host's live sessions, an entry an agent (`linkedHost`: no pid, uptime or
    memory here, another machine's)."""
    from acpctl.cli import linked

    runs = []
    for answer in answers:
        by_agent: dict[str, list[str]] = {}
        for session in linked.live_sessions(answer):
            by_agent.setdefault(str(session.get("agent")), []).append(session["sessionId"])
        runs += [
            {"linkedHost": answer.link.name, "agent": agent, "sessions": sessions}
            for agent, sessions in by_agent.items()
        ]
    return runs


def _row(run: dict[str, Any]) -> str:
    from acpctl.terminal.screen import printable

    sessions = ", ".join(s[:12] for s in run["sessions"]) or "-"
    if "linkedHost" in run:
        at, agent = f"{run['linkedHost']}:", printable(run["agent"])[:14]
        return f"{at:>7}  {agent:<14} {'':>8} {'':>9}  {sessions}"
    uptime = _duration(time.time() - run["started"])
    rss = f"{run['rss'] / 2**20:.1f} MiB"
    if run.get("host"):
        held = "spare" if run["spare"] else f"{run['clients']} client(s)"
        sessions += f"  (host pid {run['hostPid']}: {held})"
    if run.get("sandbox"):
        sessions += f"  (sandbox: {', '.join(run['sandbox'])})"
    if run.get("notRespondingSince"):
        since = time.strftime("%H:%M:%S", time.localtime(run["notRespondingSince"]))
        sessions += f"  (not responding since {since})"
    pid = run["pid"] if run["pid"] is not None else "-"  # a spare not started yet
    return f"{pid:>7}  {run['agent']:<14} {uptime:>8} {rss:>9}  {sessions}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
