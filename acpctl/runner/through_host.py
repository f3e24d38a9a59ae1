"""`run --acp` through the session host (config.toml's `host = true`): a thin stdio client
of the host on this machine. The editor's lines go to the host's unix socket and the host's
lines come back, as they are; the agent and its sessions are the host's, so closing the
editor ends neither. When no host answers, one is started detached
(`acpctl serve --exit-when-idle`).

When the host goes away, every request the editor is still waiting on is answered with an
error at once, never left to hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

from acpctl import environ, jsonrpc, paths
from acpctl import protocol as acp
from acpctl.jsonrpc.framing import MAX_LINE_BYTES, read_lines
from acpctl.jsonrpc.streams import Output, open_input

HOST_START_WAIT_S = 15.0
HOST_GONE = "the session host went away (its log: acpctl logs serve)"
HOST_STOPPED = "the session host stopped"
NOTE = "note: "  # a line for the person, which acpctl's terminal client shows too


class HostRefused(Exception):
    """The host cannot serve the agent as this client resolved it (it changed since)."""


def relay_through_host(agent: str, history: bool) -> int | None:
    """Relay stdio to the host until the editor or the host goes; the exit code. None:
    not served through the host (the reason is on stderr), so the caller serves directly."""
    if not history:
        _say("--no-history is not served through the session host; serving directly")
        return None
    try:
        return asyncio.run(_relay(agent))
    except HostRefused as exc:
        _say(f"{exc}; serving directly")
        return None


async def open_host_socket(start: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The host's unix socket, open; with `start`, a host started first when none answers
    (HostRefused when none does within HOST_START_WAIT_S), else OSError."""
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
                _start_host()
                started = True
            elif time.monotonic() > deadline:
                raise HostRefused(
                    f"no session host answered on {paths.host_socket()} within "
                    f"{HOST_START_WAIT_S:.0f} s"
                ) from None
            await asyncio.sleep(0.05)


async def host_request(
    method: str, params: dict[str, Any], start: bool = False
) -> tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]:
    """The host's unix socket opened (acpctl.host.unix), its first line sent: the answer,
    and the open stream. Raises OSError when no host listens (and none is started)."""
    reader, writer = await open_host_socket(start)
    writer.write(jsonrpc.encode(jsonrpc.request(0, method, params)))
    line = await reader.readline()
    if not line:
        writer.close()
        raise ConnectionResetError("the session host closed the connection")
    return json.loads(line), reader, writer


async def ask_host(method: str, params: dict[str, Any], timeout: float = 10) -> Any | None:
    """One request to the running host over its unix socket, and its answer (the whole
    JSON-RPC response); None when no host answers within `timeout`."""
    try:
        answer, _, writer = await asyncio.wait_for(host_request(method, params), timeout)
    except (OSError, ValueError, asyncio.TimeoutError):
        return None
    writer.close()
    return answer


async def read_status(timeout: float = 10) -> dict[str, Any] | None:
    """The running host's status (`acpctl serve --status`, doctor, ps); None when no host
    answers."""
    answer = await ask_host(acp.HOST_STATUS, {}, timeout)
    result = answer.get("result") if isinstance(answer, dict) else None
    return result if isinstance(result, dict) else None


def held_sessions(timeout: float = 2) -> dict[str, dict[str, Any]]:
    """The sessions the running host holds, by id: whether a turn runs, and who is in it
    (`sessions list`, `sessions watch`); none when no host answers."""
    status = asyncio.run(read_status(timeout))
    held = {}
    for agent in (status or {}).get("agents", []):
        for session in agent.get("sessions", []):
            held[str(session["sessionId"])] = session
    return held


async def _relay(agent: str) -> int:
    host_reader, host_writer = await _connect(agent)
    output = await Output.open(1)
    waiting: dict[tuple[bool, Any], Any] = {}  # the editor's requests, by id key
    editor = asyncio.ensure_future(_upstream(await open_input(0), host_writer, waiting))
    host = asyncio.ensure_future(_downstream(host_reader, output, waiting))
    await asyncio.wait({editor, host}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if host.done():  # the host closed first: nobody will answer what waits
        said_stopping = not host.cancelled() and host.exception() is None and host.result()
        why = HOST_STOPPED if said_stopping else HOST_GONE
        for msg_id in waiting.values():
            output.send(jsonrpc.error(msg_id, acp.INTERNAL_ERROR, why))
        _say(why)
        code = 1
    editor.cancel()
    host.cancel()
    host_writer.close()
    await output.drain()
    output.close()
    return code


async def _connect(agent: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The host's socket, connected to `agent`; the host started first when none answers."""
    try:
        params = {"agent": agent, "log": True, "environment": environ.digest(os.environ)}
        answer, reader, writer = await host_request(acp.HOST_CONNECT, params, start=True)
    except (OSError, ValueError) as exc:
        raise HostRefused(f"the session host did not answer: {exc}") from exc
    if not isinstance(answer, dict) or "result" not in answer:
        writer.close()
        error = answer.get("error") if isinstance(answer, dict) else None
        reason = error.get("message") if isinstance(error, dict) else answer
        raise HostRefused(f"the session host refused agent {agent}: {reason}")
    note = environment_note(agent, answer["result"])
    if note:
        _say(note)
    return reader, writer


def environment_note(agent: str, connected: Any) -> str | None:
    """What to say when the host runs `agent` with an environment other than ours."""
    differs = connected.get("environmentDiffers") if isinstance(connected, dict) else None
    if not differs or not isinstance(differs, list):
        return None
    return (
        f"{NOTE}{agent} runs in the session host, with the host's environment, which differs "
        f"from this one in {environ.said([str(name) for name in differs])}: to run it with "
        "this one, restart the host from here (acpctl serve --replace), or set the "
        "variables in config.toml for the agent (docs/remote.md)"
    )


def _start_host() -> None:
    """`acpctl serve`, detached from this process and its terminal: it outlives the editor."""
    subprocess.Popen(
        [sys.executable, "-m", "acpctl", "serve", "--exit-when-idle"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


async def _upstream(
    reader: asyncio.StreamReader,
    host: asyncio.StreamWriter,
    waiting: dict[tuple[bool, Any], Any],
) -> None:
    """The editor's lines to the host, until the editor closes its end."""
    async for lines in read_lines(reader):
        for line in lines:
            if line is None or not line.strip():
                continue  # an oversized line: the host would refuse it anyway
            _note_request(line, waiting)
            host.write(line + b"\n")
        await host.drain()


async def _downstream(
    host: asyncio.StreamReader,
    output: Output,
    waiting: dict[tuple[bool, Any], Any],
) -> bool:
    """The host's lines to the editor, until the host closes the socket; the agent's log
    lines to stderr, as a direct run writes them, and the host's word that it stops too.
    Whether the host said it was stopping."""
    stopping = False
    async for lines in read_lines(host):
        for line in lines:
            if line is None:
                continue
            if HOST_LOG_MARK in line and _log_line(line):
                continue
            if HOST_STOPPING_MARK in line and (notice := _stopping_line(line)):
                stopping = True
                _say(notice)  # and on to the editor: acpctl's terminal client says it too
            if waiting:
                for message in _messages(line):
                    if "method" not in message:  # a response: one request less waits
                        with contextlib.suppress(TypeError):
                            waiting.pop(jsonrpc.id_key(message.get("id")), None)
            output.write(line + b"\n")
        await output.drain()
    return stopping


HOST_LOG_MARK = acp.HOST_LOG.encode()
HOST_STOPPING_MARK = acp.HOST_STOPPING.encode()


def _stopping_line(line: bytes) -> str | None:
    """The notice to say when `line` is the host's word that it stops."""
    messages = _messages(line)
    if len(messages) != 1 or messages[0].get("method") != acp.HOST_STOPPING:
        return None
    return acp.stopping_notice(messages[0].get("params"))


def _log_line(line: bytes) -> bool:
    """Whether `line` is the host's log notification (then written to stderr)."""
    messages = _messages(line)
    if len(messages) != 1 or messages[0].get("method") != acp.HOST_LOG:
        return False
    params = messages[0].get("params")
    if isinstance(params, dict) and isinstance(params.get("message"), str):
        _say(params["message"])
    return True


def _note_request(line: bytes, waiting: dict[tuple[bool, Any], Any]) -> None:
    for message in _messages(line):
        if "method" in message and "id" in message and jsonrpc.is_id(message["id"]):
            with contextlib.suppress(TypeError):
                waiting[jsonrpc.id_key(message["id"])] = message["id"]


def _messages(line: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC objects in a line (a batch holds several); [] for anything else."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return []
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def _say(text: str) -> None:
    sys.stderr.write(f"acpctl: {text}\n")
