"""`acpctl ps`: live `acpctl run` processes."""

from __future__ import annotations

import time

import typer


def ps(as_json: bool = typer.Option(False, "--json", help="Print a JSON array.")) -> None:
    """List live acpctl runs: pid, agent, uptime, memory (agent tree included), sessions."""
    from acpctl.runner import runs

    live = runs.live_runs()
    if as_json:
        import json

        typer.echo(json.dumps(live, indent=2))
        return
    if not live:
        typer.echo("no acpctl runs are live")
        return
    typer.echo(f"{'PID':>7}  {'AGENT':<14} {'UPTIME':>8} {'RSS':>9}  SESSIONS")
    for run in live:
        uptime = _duration(time.time() - run["started"])
        rss = f"{run['rss'] / 2**20:.1f} MiB"
        sessions = ", ".join(s[:12] for s in run["sessions"]) or "-"
        typer.echo(f"{run['pid']:>7}  {run['agent']:<14} {uptime:>8} {rss:>9}  {sessions}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
