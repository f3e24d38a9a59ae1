"""What the CLI asks of the running session host, or of its files when none runs, and
prints: a token (`serve --show-token`), a new one (`--rotate-token`), the host's status
(`--status`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

from acpctl import paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.files import atomic_write
from acpctl.host.tokens import load_or_create
from acpctl.host.tokens import rotate as rotate_token
from acpctl.remote.host_socket import ask_host, read_status


def show_token(observer: bool, token_file: Path | None = None) -> int:
    """Print a token, or write it to `token_file` (0600): never new tokens while a host
    runs with the old ones (a tokens file deleted under it)."""
    if not paths.host_tokens().exists():
        running = asyncio.run(read_status())
        listens = running is not None and any(
            str(listener.get("address", "")).startswith(("ws://", "wss://"))
            for listener in running.get("listening", [])
        )
        if listens:  # a host without a TCP listener holds no tokens: new ones are made
            assert running is not None
            raise AcpctlError(
                f"{paths.host_tokens()} is gone while the session host (pid {running['pid']}) "
                "runs with the tokens it held",
                hint="`acpctl host rotate-token` (and with --observer) makes new ones "
                "that the running host takes",
            )
    token = load_or_create().by_role[acp.OBSERVER if observer else acp.CONTROLLER]
    if token_file is None:
        sys.stdout.write(token + "\n")
        return 0
    atomic_write(token_file, (token + "\n").encode())
    sys.stderr.write(
        f"acpctl: the {'observer' if observer else 'controller'} token is in {token_file} (0600)\n"
    )
    return 0


def rotate(observer: bool) -> int:
    """A new token for the role, taken by the running host (whose connections with the old
    one end), or written to the tokens file for the next start when no host runs."""
    role = acp.OBSERVER if observer else acp.CONTROLLER
    running = asyncio.run(read_status())
    if running is None:
        rotate_token(role)
        sys.stderr.write(f"acpctl: a new {role} token (no session host runs: the next takes it)\n")
        return 0
    answer = asyncio.run(ask_host(acp.HOST_ROTATE_TOKEN, {"role": role}))
    if not isinstance(answer, dict) or "result" not in answer:
        error = answer.get("error") if isinstance(answer, dict) else None
        said = error.get("message") if isinstance(error, dict) else answer or "no answer"
        raise AcpctlError(
            f"the session host (pid {running['pid']}) did not take a new token: {said}",
            hint="a host older than this acpctl: restart it (acpctl host start --replace)",
        )
    ended = answer["result"].get("ended", 0)
    sys.stderr.write(
        f"acpctl: a new {role} token, taken by the session host; {ended} connection(s) "
        "with the old one ended (`acpctl host show-token"
        + (" --observer" if observer else "")
        + "` prints it)\n"
    )
    return 0


def show_status(as_json: bool) -> int:
    status = asyncio.run(read_status())  # acpctl.remote.host_socket
    if status is None:
        sys.stderr.write(f"acpctl: no session host answers on {paths.host_socket()}\n")
        return 1
    if as_json:
        sys.stdout.write(json.dumps(status, indent=2) + "\n")
        return 0
    sys.stdout.write(f"session host pid {status['pid']}, acpctl {status.get('version')}\n")
    for listener in status.get("listening", []):
        sys.stdout.write(f"listening on {listener['address']}\n")
    if not status["agents"]:
        sys.stdout.write("no agent running\n")
    for agent in status["agents"]:
        rss = f"{agent['rss'] / 2**20:.1f} MiB" if agent.get("rss") else "-"
        spare = " (spare)" if agent.get("spare") else ""
        since = agent.get("notRespondingSince")
        silent = (
            f", not responding since {time.strftime('%H:%M:%S', time.localtime(since))}"
            if since
            else ""
        )
        sys.stdout.write(
            f"{agent['agent']}{spare}: pid {agent['agentPid'] or '-'}, {rss}, "
            f"{agent['clients']} client(s), {len(agent['sessions'])} session(s){silent}\n"
        )
        for session in agent["sessions"]:
            who = ", ".join(f"{c['name']} ({c['role']})" for c in session["clients"]) or "-"
            state = "running" if session["running"] else "idle"
            sys.stdout.write(f"  {session['sessionId']}  {state}  {who}\n")
    return 0


def stop(now: bool) -> int:
    """The running host stopped as on SIGTERM (its running turns get its stop grace; `now`:
    cancelled at once), and waited for until it is gone."""
    import psutil

    from acpctl.host.main import REPLACE_WAIT_S

    running = asyncio.run(read_status())
    if running is None:
        sys.stderr.write("acpctl: no session host runs here: nothing to stop\n")
        return 0
    pid = int(running["pid"])
    answer = asyncio.run(ask_host(acp.HOST_STOP, {"now": now}))
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        raise AcpctlError(
            f"the session host (pid {pid}) did not take the stop: {answer}",
            hint=f"a host older than this acpctl: kill {pid} (its turns get their grace)",
        )
    turns = int(result.get("runningTurns") or 0)
    if turns and not now:
        sys.stderr.write(
            f"acpctl: stopping the session host (pid {pid}): {turns} running turn(s) may "
            "finish first (to cancel them: acpctl host stop --now)\n"
        )
    deadline = time.monotonic() + REPLACE_WAIT_S
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        time.sleep(0.05)
    if psutil.pid_exists(pid) and asyncio.run(read_status()) is not None:
        raise AcpctlError(f"the session host (pid {pid}) is still running", hint=f"kill {pid}")
    cancelled = f", {turns} running turn(s) cancelled" if turns and now else ""
    sys.stderr.write(
        f"acpctl: the session host (pid {pid}) stopped{cancelled}; its sessions stay in the "
        "history, and the next editor's `run --acp` starts a host again when config.toml "
        "asks for one\n"
    )
    return 0
