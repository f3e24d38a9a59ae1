"""ACP's remote transport on TCP, on `/acp` (the default agent) and `/acp/NAME` (and a
linked host's agent for the page, `/acp/@HOST/NAME`: host/linked_proxy.py): a
WebSocket upgrade (host/websocket.py), or Streamable HTTP (host/streamable.py), each a
transport of a logical connection (host/connection.py), once the door (host/door.py) has
let the request in; and the host's page (host/page.py). A TCP connection is watched
from its first byte (SlowHeadersGuard): its request's headers must come in time.
"""

from __future__ import annotations

import asyncio
import logging
import select
import ssl
from typing import Any

from aiohttp import hdrs, web

from acpctl.errors import AcpctlError
from acpctl.host import linked_proxy, page, push_routes, streamable
from acpctl.host.agents import AgentChanged, AgentPool
from acpctl.host.connection import LogicalConnection
from acpctl.host.door import Door, refuse
from acpctl.host.notify import Notifier
from acpctl.host.registry import Connections
from acpctl.host.websocket import serve_socket

ENDPOINT = "/acp"
MAX_MESSAGE_BYTES = 16 << 20
KEEPALIVE_S = 20.0  # WebSocket pings; a client silent for this long twice is gone


def make_app(
    pool: AgentPool,
    door: Door,
    connections: Connections,
    notifier: Notifier,
    log: logging.Logger,
) -> web.Application:

    @web.middleware
    async def next_headers_due(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
            return response
        finally:  # kept alive, the connection's next request has the same deadline
            guard = door.guards.get(request.transport)
            if guard is not None:
                guard.expect_headers()

    async def handle(request: web.Request) -> web.StreamResponse:
        decided = door.refusal(request)
        if isinstance(decided, web.Response):
            log.info("refused %s %s: %d", request.method, request.path, decided.status)
            return decided
        caller = decided
        agent = request.match_info.get("agent")
        if request.method == "GET" and request.headers.get(hdrs.UPGRADE, "").lower() == "websocket":

            async def new_connection(connection_id: str, link: bool) -> LogicalConnection:
                return await connections.open(agent, caller, connection_id, link=link)

            try:
                await pool.get(agent)  # an unknown agent is refused before the upgrade
            except AgentChanged as exc:
                return refuse(409, str(exc))
            except AcpctlError as exc:
                return refuse(404, str(exc))
            return await serve_socket(
                request,
                new_connection,
                lambda connection_id: connections.find(connection_id, caller),
                MAX_MESSAGE_BYTES,
                KEEPALIVE_S,
                log,
            )
        return await streamable.handle(
            request, connections, agent, caller, log, door.body_timeout_s
        )

    async def closing(app: web.Application) -> None:
        await connections.close()

    app = web.Application(client_max_size=MAX_MESSAGE_BYTES, middlewares=[next_headers_due])
    for path in (ENDPOINT, ENDPOINT + "/{agent}"):
        app.router.add_route("*", path, handle)
    linked_proxy.add_routes(app, door, pool, MAX_MESSAGE_BYTES, KEEPALIVE_S, log)
    page.add_routes(app, door, log)
    push_routes.add_routes(app, door, pool, notifier, log)
    app.on_shutdown.append(closing)
    return app


class SlowHeadersGuard(asyncio.Protocol):
    """Wraps the HTTP server's protocol for one TCP connection: admitted by the door (which
    may close an unauthenticated connection for it), secured by the door's TLS when it
    has one, and closed when a request's headers have not arrived within the door's
    header timeout (the first request's, handshake included, and each later one's on a
    kept-alive connection: `expect_headers`)."""

    def __init__(self, inner: Any, door: Door) -> None:
        self._inner = inner
        self._door = door
        self._seen = b""
        self._timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.authenticated = False  # a request on it passed the door
        self._served = False  # the HTTP server has it (after the handshake, under TLS)
        self._received = False  # a byte of a request came
        self._descriptor = -1
        self._handshake: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        socket = transport.get_extra_info("socket")
        self._descriptor = socket.fileno() if socket is not None else -1
        if not self._door.admit(self):
            transport.close()
            return
        self.expect_headers()
        if self._door.tls is None:
            self._serve(transport)
        else:
            self._handshake = asyncio.ensure_future(self._secure(transport, self._door.tls))

    async def _secure(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            secured = await loop.start_tls(
                raw,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self._door.header_timeout_s,
            )
        except Exception:  # any failed, timed out or abandoned handshake: gone, quietly
            self._gone(raw)
            raw.abort()
            return
        if secured is None or raw.is_closing():
            self._gone(raw)
            return
        self.transport = secured
        self._door.secured(raw, self)
        self._serve(secured)

    def _serve(self, transport: asyncio.Transport) -> None:
        self._served = True
        self._inner.connection_made(transport)

    def begun(self) -> bool:
        """Whether a request has begun to come on it: a byte of one read, or waiting to be
        (asked of the socket: its bytes may be there before the event loop reads them)."""
        if self._received or self._descriptor < 0:
            return True
        poller = select.poll()
        poller.register(self._descriptor, select.POLLIN)
        return bool(poller.poll(0))

    def expect_headers(self) -> None:
        """A request's headers are due within the header timeout from now."""
        if self.transport is None or self.transport.is_closing():
            return
        if self._timer is not None:
            self._timer.cancel()
        self._seen = b""
        self._timer = asyncio.get_running_loop().call_later(
            self._door.header_timeout_s, self.transport.close
        )

    def evict(self) -> None:
        """Make way for a newer connection (this one has not authenticated)."""
        self._door.guards.pop(self.transport, None)
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._received = True
        if self._timer is not None:
            self._seen = (self._seen + data)[-(16 << 10) :]
            if b"\r\n\r\n" in self._seen:
                self._timer.cancel()
                self._timer = None
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        if not self._served:
            return None
        result: bool | None = self._inner.eof_received()
        return result

    def _gone(self, transport: asyncio.BaseTransport | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._door.guards.pop(transport, None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone(self.transport)
        if self._served:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._served:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._served:
            self._inner.resume_writing()
