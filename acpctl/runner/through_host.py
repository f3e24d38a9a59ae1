"""`run --acp` through the session host (config.toml's `host = true`): a thin stdio client
of the host on this machine. The editor's lines go to the host's unix socket as WebSocket
text frames and the host's frames come back as lines; the agent and its sessions are the
host's, so closing the editor ends neither. When no host answers, one is started detached
(`acpctl serve --exit-when-idle`).

When the host goes away, every request the editor is still waiting on is answered with an
error at once, never left to hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from acpctl import jsonrpc, paths
from acpctl import protocol as acp
from acpctl.jsonrpc.framing import MAX_LINE_BYTES, read_lines
from acpctl.jsonrpc.streams import Output, open_input

if TYPE_CHECKING:
    import aiohttp

HOST_START_WAIT_S = 15.0
HOST_GONE = "the session host went away (its log: acpctl logs serve)"


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


async def _relay(agent: str) -> int:
    import aiohttp

    connector = aiohttp.UnixConnector(path=str(paths.host_socket()))
    async with aiohttp.ClientSession(connector=connector) as http:
        socket = await _connect(http, agent)
        output = await Output.open(1)
        waiting: dict[tuple[bool, Any], Any] = {}  # the editor's requests, by id key
        editor = asyncio.ensure_future(_upstream(await open_input(0), socket, waiting))
        host = asyncio.ensure_future(_downstream(socket, output, waiting))
        await asyncio.wait({editor, host}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if host.done():  # the host closed first: nobody will answer what waits
            for msg_id in waiting.values():
                output.send(jsonrpc.error(msg_id, acp.INTERNAL_ERROR, HOST_GONE))
            _say(HOST_GONE)
            code = 1
        editor.cancel()
        host.cancel()
        await socket.close()
        await output.drain()
        output.close()
        return code


async def _connect(
    http: aiohttp.ClientSession, agent: str
) -> aiohttp.ClientWebSocketResponse[bool]:
    """The host's WebSocket for `agent`; the host started first when none answers."""
    import aiohttp

    url = f"ws://localhost/acp/{quote(agent, safe='')}"
    started = False
    deadline = time.monotonic() + HOST_START_WAIT_S
    while True:
        try:
            return await http.ws_connect(url, max_msg_size=MAX_LINE_BYTES, autoping=True)
        except aiohttp.WSServerHandshakeError as exc:
            raise HostRefused(f"the session host refused agent {agent}: {exc.message}") from exc
        except (aiohttp.ClientConnectionError, OSError):
            if not started:
                _start_host()
                started = True
            elif time.monotonic() > deadline:
                raise HostRefused(
                    f"no session host answered on {paths.host_socket()} within "
                    f"{HOST_START_WAIT_S:.0f} s"
                ) from None
            await asyncio.sleep(0.05)


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
    socket: aiohttp.ClientWebSocketResponse[bool],
    waiting: dict[tuple[bool, Any], Any],
) -> None:
    """The editor's lines to the host, until the editor closes its end."""
    async for lines in read_lines(reader):
        for line in lines:
            if line is None or not line.strip():
                continue  # an oversized line: the host would refuse it anyway
            _note_request(line, waiting)
            await socket.send_str(line.decode("utf-8", "replace"))


async def _downstream(
    socket: aiohttp.ClientWebSocketResponse[bool],
    output: Output,
    waiting: dict[tuple[bool, Any], Any],
) -> None:
    """The host's frames to the editor, until the host closes the socket."""
    import aiohttp

    async for frame in socket:
        if frame.type != aiohttp.WSMsgType.TEXT:
            continue
        text: str = frame.data
        if waiting:
            for message in _messages(text):
                if "method" not in message:  # a response: one request less waits
                    with contextlib.suppress(TypeError):
                        waiting.pop(jsonrpc.id_key(message.get("id")), None)
        output.write(text.encode() + b"\n")
        await output.drain()


def _note_request(line: bytes, waiting: dict[tuple[bool, Any], Any]) -> None:
    for message in _messages(line):
        if "method" in message and jsonrpc.is_id(message.get("id")):
            with contextlib.suppress(TypeError):
                waiting[jsonrpc.id_key(message["id"])] = message["id"]


def _messages(text: str | bytes) -> list[dict[str, Any]]:
    """The JSON-RPC objects in a line or frame (a batch holds several); [] for anything else."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return []
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def _say(text: str) -> None:
    sys.stderr.write(f"acpctl: {text}\n")
