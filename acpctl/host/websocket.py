"""ACP's WebSocket profile: one JSON-RPC message a text frame, both ways, every stream of
the connection on the one socket. A socket that drops can be resumed on a new one: its
first frame is a `stream/resume` request naming the connection and the last cursor the
client holds; the host replays what came after, answers with the turn's state, and goes
on live, or refuses with `stream/resume_failed` and closes.

What the host sends is queued and written by one task, so the server never waits on a
client's network; a socket that falls too far behind is closed (its connection can resume)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket as pysocket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import WSMsgType, web

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.connection import (
    CONNECTION_ID_HEADER,
    LogicalConnection,
    resume,
    resume_failed,
    resume_request,
)
from acpctl.host.cursors import ALL_STREAMS, ResumeRefused
from acpctl.host.outbox import Outbox, Reader

TOO_SLOW = 1013  # "try again later"
POLICY = 1008
# Close codes of a client that left on purpose; any other end (no close frame: 1006) is a
# drop, and the connection waits its grace time for a resume.
LEFT = frozenset({1000, 1001})
FIRST_FRAME_TIMEOUT_S = 30.0
LINES_FRAME = 1 << 20  # characters a frame of lines holds (the link takes 16 MiB)


class SocketSender:
    """The one task that writes a socket's outbox to it, so the server never waits on a
    client's network."""

    def __init__(
        self, socket: web.WebSocketResponse, log: logging.Logger, tcp: pysocket.socket | None
    ) -> None:
        self._socket = socket
        self._tcp = tcp if tcp is not None and hasattr(pysocket, "TCP_CORK") else None
        self.outbox = Outbox(log)
        self._task = asyncio.ensure_future(self._send_all())

    async def _send_all(self) -> None:
        lines = self._socket.ws_protocol == acp.WEBSOCKET_LINES
        with contextlib.suppress(ConnectionError, RuntimeError):  # the client went mid-send
            while (items := await self.outbox.take()) is not None:
                self._cork(1)
                if lines:
                    for frame in _frames(items):
                        await self._socket.send_str(frame)
                else:
                    for _, text in items:
                        await self._socket.send_str(text)
                self._cork(0)
            if self.outbox.cut:
                await self._socket.close(code=TOO_SLOW, message=b"too slow")

    def _cork(self, on: int) -> None:
        """A batch's frames leave in full segments (one system call each still, but not a
        packet and a wake-up of the client each): TCP_CORK, where the system has it."""
        if self._tcp is not None:
            with contextlib.suppress(OSError):
                self._tcp.setsockopt(pysocket.IPPROTO_TCP, pysocket.TCP_CORK, on)

    async def close(self) -> None:
        """Send what is queued, then stop."""
        self.outbox.close()
        with contextlib.suppress(Exception):
            await self._task


def _frames(items: list[tuple[int, str]]) -> Iterator[str]:
    """The texts as frames of lines (acp.WEBSOCKET_LINES), each of at most LINES_FRAME
    characters unless one message alone is longer."""
    frame: list[str] = []
    size = 0
    for _, text in items:
        if frame and size + len(text) > LINES_FRAME:
            yield "\n".join(frame)
            frame, size = [], 0
        frame.append(text)
        size += len(text) + 1
    if frame:
        yield "\n".join(frame)


async def serve_socket(
    request: web.Request,
    new_connection: Callable[[str, bool], Awaitable[LogicalConnection]],
    find_connection: Callable[[str], LogicalConnection | None],
    max_message: int,
    keepalive_s: float,
    log: logging.Logger,
) -> web.WebSocketResponse:
    """The socket, until it closes: a new connection's (the client's first frame is its
    initialize; `new_connection(id, is_link)` makes it), or a resumed one's."""
    socket = web.WebSocketResponse(
        max_msg_size=max_message,
        heartbeat=keepalive_s,
        protocols=(acp.WEBSOCKET_LINES, acp.WEBSOCKET_PAGE),
    )
    connection_id = request.headers.get(CONNECTION_ID_HEADER) or uuid.uuid4().hex
    socket.headers[CONNECTION_ID_HEADER] = connection_id
    await socket.prepare(request)
    deadline = asyncio.get_running_loop().time() + FIRST_FRAME_TIMEOUT_S
    try:
        first = await socket.receive(timeout=FIRST_FRAME_TIMEOUT_S)
        while first.type == WSMsgType.BINARY:  # nothing in ACP: ignored, as later on
            left = deadline - asyncio.get_running_loop().time()
            first = await socket.receive(timeout=max(left, 0.001))
    except asyncio.TimeoutError:
        await socket.close()
        return socket
    if first.type != WSMsgType.TEXT:
        await socket.close()
        return socket
    resume_asked = resume_request(first.data)
    transport = request.transport
    sender = SocketSender(socket, log, transport.get_extra_info("socket") if transport else None)
    reader = sender.outbox.reader(ALL_STREAMS)
    if resume_asked is not None:
        connection = await _resume(socket, resume_asked, connection_id, find_connection, reader)
        if connection is None:
            await sender.close()
            return socket
    else:
        try:
            # The subprotocol is acpctl's link's: it is told how much a replay covered.
            connection = await new_connection(
                connection_id, socket.ws_protocol == acp.WEBSOCKET_LINES
            )
        except AcpctlError as exc:  # the agent went, or the id is another connection's
            await socket.close(code=POLICY, message=str(exc).encode()[:120])
            await sender.close()
            return socket
        connection.attach(reader, connection.backlog(ALL_STREAMS, None))
        _take(connection, first.data, log)
    # A connection ended by the host (its token was rotated, say) closes its socket.
    ended = asyncio.ensure_future(_close_when_ended(connection, socket))
    try:
        async for frame in socket:
            if frame.type == WSMsgType.TEXT:
                _take(connection, frame.data, log)
            elif frame.type == WSMsgType.ERROR:
                log.info("a client's WebSocket failed: %s", socket.exception())
                break
            # Binary frames carry nothing in ACP: ignored, as the SDKs do.
    finally:
        ended.cancel()
        connection.detach(reader)
        if socket.close_code in LEFT:
            connection.end()  # the client closed it: it has gone, not dropped
        await sender.close()
        await socket.close()
    return socket


async def _close_when_ended(connection: LogicalConnection, socket: web.WebSocketResponse) -> None:
    await connection.done.wait()
    await socket.close(code=POLICY, message=b"the host ended this connection")


def _take(connection: LogicalConnection, text: str, log: logging.Logger) -> None:
    if not connection.deliver(text.encode()):
        log.info("a request repeated on connection %s was not run again", connection.id)


async def _resume(
    socket: web.WebSocketResponse,
    request: dict[str, Any],
    connection_id: str,
    find_connection: Callable[[str], LogicalConnection | None],
    reader: Reader,
) -> LogicalConnection | None:
    """Attach `reader` to the connection the request names, after its cursor; None (the
    client told why, the socket closed) when that cannot be done."""
    try:
        return resume(request, find_connection, reader, connection_id)
    except ResumeRefused as exc:
        for text in resume_failed(request, str(exc)):
            await socket.send_str(text)
        await socket.close()
        return None
