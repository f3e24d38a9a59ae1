"""ACP's Streamable HTTP profile, as the SDKs implement it. `POST` carries one client
message (application/json, else 415; a batch 501): `initialize` is answered 200 with its
result in the body and the new `Acp-Connection-Id`; any other message needs that header
(400 without, 404 unknown), and the session-scoped ones `Acp-Session-Id` too, and is
answered 202 at once, its result arriving on a stream. `GET` with `Accept:
text/event-stream` (else 406) opens the connection's stream, or a session's with
`Acp-Session-Id` (before or after an answer establishes the session: the session's
messages go there from then on, and on the connection's stream until then; a load's
replay and its answer go out on one stream, in order); each event's `id:` is its cursor, and
`Last-Event-ID` resumes after it (409 when the cursor is not held). `DELETE` ends the
connection (202)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from aiohttp import hdrs, web

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentChanged
from acpctl.host.connection import (
    CONNECTION_ID_HEADER,
    CONNECTION_STREAM,
    SESSION_ID_HEADER,
    LogicalConnection,
    TooManySessions,
)
from acpctl.host.cursors import ResumeRefused
from acpctl.host.outbox import Backlog, Outbox
from acpctl.host.registry import Caller, Connections, TooManyConnections

SSE = "text/event-stream"
KEEPALIVE_S = 15.0  # an SSE comment this often on an idle stream (the SDKs' interval)
INITIALIZE_TIMEOUT_S = 60.0


def _error(status: int, why: str) -> web.Response:
    return web.json_response({"error": why}, status=status)


async def handle(
    request: web.Request,
    connections: Connections,
    agent: str | None,
    caller: Caller,
    log: logging.Logger,
    body_timeout_s: float,
) -> web.StreamResponse:
    if request.method == "POST":
        return await _post(request, connections, agent, caller, body_timeout_s)
    if request.method == "GET":
        return await _get(request, connections, caller, log)
    if request.method == "DELETE":
        named = _named(request, connections, caller, with_session=False)
        if isinstance(named, web.Response):
            return named
        named[0].end()
        return web.Response(status=202)
    return _error(405, "POST, GET or DELETE")


def _named(
    request: web.Request, connections: Connections, caller: Caller, with_session: bool = True
) -> tuple[LogicalConnection, str | None] | web.Response:
    """The connection `Acp-Connection-Id` names (400 without, 404 unknown or another
    caller's) and the session `Acp-Session-Id` names on it, which need not be established
    yet (a client opens its stream before it loads it); or the response that refuses the
    request."""
    connection_id = request.headers.get(CONNECTION_ID_HEADER)
    if connection_id is None:
        return _error(400, f"{CONNECTION_ID_HEADER} is required")
    connection = connections.find(connection_id, caller)
    if connection is None:
        return _error(404, "unknown connection")
    session = request.headers.get(SESSION_ID_HEADER) if with_session else None
    return connection, session


async def _post(
    request: web.Request,
    connections: Connections,
    agent: str | None,
    caller: Caller,
    body_timeout_s: float,
) -> web.Response:
    if not request.content_type.lower().startswith("application/json"):
        return _error(415, "Content-Type must be application/json")
    try:
        body = await asyncio.wait_for(request.read(), body_timeout_s)
    except asyncio.TimeoutError:  # a slow body holds nothing for long
        refused = _error(408, f"the body did not come within {body_timeout_s:g} s")
        refused.force_close()
        return refused
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return _error(400, "the body is not JSON")
    if isinstance(message, list):
        return _error(501, "batches are not served over HTTP")
    if not isinstance(message, dict):
        return _error(400, "the body is not a JSON-RPC message")
    if message.get("method") == acp.INITIALIZE and jsonrpc.is_id(message.get("id")):
        return await _initialize(connections, agent, caller, message, body)
    named = _named(request, connections, caller)
    if isinstance(named, web.Response):
        return named
    connection, session = named
    if message.get("method") in acp.SESSION_SCOPED_METHODS and session is None:
        return _error(400, f"{SESSION_ID_HEADER} is required for {message['method']}")
    connection.deliver(body)  # a repeated request is not run again, and still 202
    return web.Response(status=202)


async def _initialize(
    connections: Connections,
    agent: str | None,
    caller: Caller,
    message: dict[str, object],
    body: bytes,
) -> web.Response:
    try:
        connection = await connections.open(agent, caller, "")
    except AgentChanged as exc:
        return _error(409, str(exc))
    except TooManyConnections as exc:
        return _error(429, str(exc))
    except AcpctlError as exc:
        return _error(404, str(exc))
    answer = connection.capture(message["id"])
    connection.deliver(body)
    try:
        text = await asyncio.wait_for(answer, INITIALIZE_TIMEOUT_S)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        connection.end()
        return _error(504, "initialize was not answered")
    return web.Response(
        text=text,
        content_type="application/json",
        headers={CONNECTION_ID_HEADER: connection.id},
    )


async def _get(
    request: web.Request, connections: Connections, caller: Caller, log: logging.Logger
) -> web.StreamResponse:
    if SSE not in request.headers.get(hdrs.ACCEPT, ""):
        return _error(406, f"Accept must include {SSE}")
    named = _named(request, connections, caller)
    if isinstance(named, web.Response):
        return named
    connection, session = named
    stream = session if session is not None else CONNECTION_STREAM
    try:
        if session is not None:
            connection.opened(session)
        backlog = connection.backlog(stream, request.headers.get("Last-Event-ID"))
    except ResumeRefused as exc:
        return _error(409, str(exc))
    except TooManySessions as exc:
        return _error(429, str(exc))
    response = web.StreamResponse(
        headers={
            hdrs.CONTENT_TYPE: SSE,
            hdrs.CACHE_CONTROL: "no-cache",
            CONNECTION_ID_HEADER: connection.id,
        }
    )
    await response.prepare(request)
    await _stream(response, connection, stream, backlog, log)
    return response


async def _stream(
    response: web.StreamResponse,
    connection: LogicalConnection,
    stream: str,
    backlog: Backlog,
    log: logging.Logger,
) -> None:
    """Events as they come (first the backlog), a keepalive comment when idle, until the
    client goes or the connection ends."""
    outbox = Outbox(log)
    reader = outbox.reader(stream)
    connection.attach(reader, backlog)
    ended = asyncio.ensure_future(connection.done.wait())
    ended.add_done_callback(lambda _: outbox.close())  # what is queued still goes out
    try:
        while (items := await outbox.take(KEEPALIVE_S)) is not None:
            if not items:
                await response.write(b": keepalive\n\n")
                continue
            # One write for what waits: a chunk and a packet for all, not for each event.
            events = "".join(f"id: {cursor}\ndata: {text}\n\n" for cursor, text in items)
            await response.write(events.encode())
    except (ConnectionError, RuntimeError):  # the client went away
        return
    finally:
        ended.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ended
        connection.detach(reader)
