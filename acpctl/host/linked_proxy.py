"""A linked host's agent, reached by this host's page (`/acp/@HOST/AGENT`, host/http.py): the
page's WebSocket joined to the link (remote/link.py) this host keeps to that agent, with
the linked host's token, which never reaches the page. The page opens, prompts, cancels and
answers in a linked host's session as in one of this host's.

The device's role holds there: an observer's connection passes on its initialize, its
session/attach (as an observer), and its cancels of its own requests, and nothing else (its
answers to the agent are dropped); the rest is refused here. Each client says who it is
there as "DEVICE (through THIS HOST)". A dropped page connects again (a resume is refused:
the page then joins anew)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from aiohttp import WSMsgType, hdrs, web

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.config import Remote
from acpctl.host.agents import AgentPool
from acpctl.host.door import Door, refuse
from acpctl.host.registry import Caller
from acpctl.jsonrpc.framing import read_lines
from acpctl.jsonrpc.streams import Lines, MemoryPipe
from acpctl.remote.relay import link_remote

OBSERVER_PASSES = frozenset({acp.INITIALIZE, acp.SESSION_ATTACH, acp.CANCEL_REQUEST})


PATH = "/acp/@{host}/{agent}"


def add_routes(
    app: web.Application,
    door: Door,
    pool: AgentPool,
    max_message: int,
    keepalive_s: float,
    log: logging.Logger,
) -> None:
    async def linked(request: web.Request) -> web.StreamResponse:
        decided = door.refusal(request)
        if isinstance(decided, web.Response):
            return decided
        host, agent = request.match_info["host"], request.match_info["agent"]
        link = pool.linked.link(host) if pool.linked is not None else None
        if link is None or pool.linked is None:
            return refuse(404, f"no linked host {host!r}")
        if request.headers.get(hdrs.UPGRADE, "").lower() != "websocket":
            return refuse(400, "a linked host's agent is reached over WebSocket")
        remote, through = link.agent_remote(agent), pool.linked.name
        return await serve_linked(request, remote, decided, through, max_message, keepalive_s, log)

    app.router.add_get(PATH, linked)


async def serve_linked(
    request: web.Request,
    remote: Remote,
    caller: Caller,
    through: str,
    max_message: int,
    keepalive_s: float,
    log: logging.Logger,
) -> web.WebSocketResponse:
    socket = web.WebSocketResponse(
        max_msg_size=max_message, heartbeat=keepalive_s, protocols=(acp.WEBSOCKET_PAGE,)
    )
    await socket.prepare(request)
    to_link, from_link = MemoryPipe(), MemoryPipe()

    async def ends() -> tuple[asyncio.StreamReader, Lines]:
        return to_link.reader, from_link

    linking = asyncio.ensure_future(link_remote(remote, log, ends))
    down = asyncio.ensure_future(_to_page(from_link.reader, socket))
    named = f"{caller.device or 'a client'} (through {through})"
    try:
        async for frame in socket:
            if frame.type != WSMsgType.TEXT:
                continue
            message = _decoded(frame.data)
            if message is None or message.get("method") == acp.STREAM_RESUME:
                break  # nothing to resume here: the page joins anew
            if caller.role == acp.OBSERVER and message.get("method") not in OBSERVER_PASSES:
                if "method" in message and "id" in message:  # a request: refused here
                    said = f"not authorised: an observer cannot send {message['method']}"
                    refused = jsonrpc.error(message["id"], acp.NOT_AUTHORISED, said)
                    await socket.send_str(json.dumps(refused))
                continue  # an answer to the agent, or a notification: dropped
            to_link.write(jsonrpc.encode(_as_named(message, named, caller)))
    finally:
        to_link.close()
        for task in (linking, down):
            task.cancel()
        for task in (linking, down):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await socket.close()
    return socket


async def _to_page(reader: asyncio.StreamReader, socket: web.WebSocketResponse) -> None:
    async for lines in read_lines(reader):
        for line in lines:
            if line:
                await socket.send_str(line.decode("utf-8", "replace"))


def _decoded(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _as_named(message: dict[str, Any], named: str, caller: Caller) -> dict[str, Any]:
    """The page's initialize and session/attach as the linked host is to name the client
    (and an observer's attach as an observer's)."""
    method, params = message.get("method"), message.get("params")
    if method not in (acp.INITIALIZE, acp.SESSION_ATTACH) or not isinstance(params, dict):
        return message
    info = params.get("clientInfo")
    params = {**params, "clientInfo": {**(info if isinstance(info, dict) else {}), "name": named}}
    if method == acp.SESSION_ATTACH and caller.role == acp.OBSERVER:
        params["role"] = acp.OBSERVER
    return {**message, "params": params}
