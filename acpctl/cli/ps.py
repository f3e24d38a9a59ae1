"""`acpctl ps`: live `acpctl run` processes, and the session host's agents."""

from __future__ import annotations

import time

import typer


def ps(as_json: bool = typer.Option(False, "--json", help="Print a JSON array.")) -> None:
    """List live acpctl runs and the session host's agents: pid, agent, uptime, memory
    (agent tree included), sessions, and a sandboxed agent's roots."""
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
    if as_json:
        import json

        typer.echo(json.dumps(live, indent=2))
        return
    if not live:
        typer.echo("no acpctl runs are live, and no session host runs agents")
        return
    typer.echo(f"{'PID':>7}  {'AGENT':<14} {'UPTIME':>8} {'RSS':>9}  SESSIONS")
    for run in live:
        uptime = _duration(time.time() - run["started"])
        rss = f"{run['rss'] / 2**20:.1f} MiB"
        sessions = ", ".join(s[:12] for s in run["sessions"]) or "-"
        if run.get("host"):
            held = "spare" if run["spare"] else f"{run['clients']} client(s)"
            sessions += f"  (host pid {run['hostPid']}: {held})"
        if run.get("sandbox"):
            sessions += f"  (sandbox: {', '.join(run['sandbox'])})"
        if run.get("notRespondingSince"):
            since = time.strftime("%H:%M:%S", time.localtime(run["notRespondingSince"]))
            sessions += f"  (not responding since {since})"
        pid = run["pid"] if run["pid"] is not None else "-"  # a spare not started yet
        typer.echo(f"{pid:>7}  {run['agent']:<14} {uptime:>8} {rss:>9}  {sessions}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
