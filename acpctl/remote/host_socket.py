"""The session host of this machine as its clients reach it: its unix socket (host/unix.py),
a host started when none answers, and the one-line requests acpctl's commands ask of it
(`serve --status`, doctor, ps, `sessions list`). No HTTP here: `run --acp` through the
host starts without importing an HTTP library."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from acpctl import jsonrpc, paths
from acpctl import protocol as acp
from acpctl.jsonrpc.framing import MAX_LINE_BYTES

HOST_START_WAIT_S = 15.0


class NoHost(OSError):
    """No session host answered, and none started in time."""


async def open_host_socket(start: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The host's unix socket, open; with `start`, a host started first when none answers
    (NoHost when none does within HOST_START_WAIT_S), else the OSError of the attempt."""
    started = False
    deadline = time.monotonic() + HOST_START_WAIT_S
    while True:
        try:
            return await asyncio.open_unix_connection(
                str(paths.host_socket()), limit=MAX_LINE_BYTES
            )
        except OSError:
            if not start:
                raise
            if not started:
                start_host()
                started = True
            elif time.monotonic() > deadline:
                raise NoHost(
                    f"no session host answered on {paths.host_socket()} within "
                    f"{HOST_START_WAIT_S:.0f} s (its log: acpctl logs serve)"
                ) from None
            await asyncio.sleep(0.05)


def start_host() -> None:
    """`acpctl host start`, detached from this process and its terminal: it outlives the editor.
    Two clients starting one at once is safe: the host's lock lets one of them run."""
    subprocess.Popen(
        [sys.executable, "-m", "acpctl", "host", "start", "--exit-when-idle"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


async def ask_host(method: str, params: dict[str, Any], timeout: float = 10) -> Any | None:
    """One request to the running host over its unix socket, and its answer (the whole
    JSON-RPC response); None when no host answers within `timeout`."""

    async def ask() -> Any:
        reader, writer = await open_host_socket(start=False)
        try:
            writer.write(jsonrpc.encode(jsonrpc.request(0, method, params)))
            line = await reader.readline()
        finally:
            writer.close()
        if not line:
            raise ConnectionResetError("the session host closed the connection")
        return json.loads(line)

    try:
        return await asyncio.wait_for(ask(), timeout)
    except (OSError, ValueError, asyncio.TimeoutError):
        return None


async def read_status(timeout: float = 10) -> dict[str, Any] | None:
    """The running host's status (`acpctl host status`, doctor, ps); None when no host
    answers."""
    answer = await ask_host(acp.HOST_STATUS, {}, timeout)
    result = answer.get("result") if isinstance(answer, dict) else None
    return result if isinstance(result, dict) else None


def held_sessions(timeout: float = 2) -> dict[str, dict[str, Any]]:
    """The sessions the running host holds, by id: whether a turn runs, and who is in it
    (`sessions list`, `sessions watch`, `sessions attach`); none when no host answers."""
    status = asyncio.run(read_status(timeout))
    held = {}
    for agent in (status or {}).get("agents", []):
        for session in agent.get("sessions", []):
            held[str(session["sessionId"])] = session
    return held
