"""The host's door: ACP's remote transport on `/acp` (the default agent) and `/acp/NAME`:
a WebSocket upgrade (host/websocket.py), or Streamable HTTP (host/streamable.py), each a
transport of a logical connection (host/connection.py). On TCP every request must pass,
in this order: its Host (one of the listening names: DNS rebinding), its Origin (only the
allowed ones; none is allowed by default, so no web page can drive an agent), a bearer
token (whose role the client gets), and the limits on failed authentications and on
connections. (The unix socket, host/unix.py, has its permissions for all of it.)

docs/remote.md says what each check stops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import hdrs, web

from acpctl.config import is_loopback
from acpctl.errors import AcpctlError
from acpctl.host import streamable
from acpctl.host.agents import AgentChanged, AgentPool
from acpctl.host.connection import LogicalConnection
from acpctl.host.registry import Connections
from acpctl.host.tokens import Tokens
from acpctl.host.websocket import serve_socket

ENDPOINT = "/acp"
MAX_MESSAGE_BYTES = 16 << 20
KEEPALIVE_S = 20.0  # WebSocket pings; a client silent for this long twice is gone
# Failed authentications: past this many from one address in the window, 429 until it ends.
MAX_FAILURES = 10
FAILURE_WINDOW_S = 60.0
MAX_REMEMBERED_ADDRESSES = 4096
MAX_CONNECTIONS = 64
# Connections that have not authenticated yet (every new one, until its first request):
# at most this many from one address; and when the host is full, the oldest of them, from
# the address that holds most, is closed to make way for a new one. So sockets opened and
# held without a token never keep a client with one out, and a client's own burst of
# connections is never cut.
MAX_UNAUTHENTICATED_PER_ADDRESS = 32
HEADER_TIMEOUT_S = 10.0  # a request's headers (every request's) must arrive within this
BODY_TIMEOUT_FACTOR = 3  # and its body within three times that


def is_loopback_name(host: str) -> bool:
    """Whether a Host header (a name, and a port or none) names this machine's loopback:
    localhost, 127.0.0.0/8 or [::1]."""
    name = host
    if host.startswith("["):
        name, _, _ = host[1:].partition("]")
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
        if not port.isdigit():
            return False
    return is_loopback(name)


@dataclass
class Door:
    """What one listener checks."""

    tokens: Tokens
    hosts: frozenset[str] = frozenset()  # Host header values accepted (lowercase)
    # A loopback listener: a loopback name on any port passes too (an `ssh -L` forward or a
    # local proxy on another port; a DNS-rebinding page can only use a name that is not).
    loopback: bool = False
    origins: frozenset[str] = frozenset()  # Origin values accepted
    failures: dict[str, deque[float]] = field(default_factory=dict)  # by address
    # The TCP connections open, oldest first, by their transport (SlowHeadersGuard).
    guards: dict[Any, SlowHeadersGuard] = field(default_factory=dict)
    header_timeout_s: float = HEADER_TIMEOUT_S  # `acpctl serve --header-timeout`

    @property
    def body_timeout_s(self) -> float:
        """A request's body is due within this of its headers."""
        return BODY_TIMEOUT_FACTOR * self.header_timeout_s

    @property
    def connections(self) -> int:
        return len(self.guards)

    def admit(self, guard: SlowHeadersGuard) -> bool:
        """Room for a new connection: the oldest unauthenticated one of its address, or of
        all, makes way when those are at their limit. False: every place is held by an
        authenticated client."""
        waiting = [g for g in self.guards.values() if not g.authenticated]  # oldest first
        same_address = [g for g in waiting if g.address == guard.address]
        if len(same_address) >= MAX_UNAUTHENTICATED_PER_ADDRESS:
            same_address[0].evict()
        elif self.connections >= MAX_CONNECTIONS:
            if not waiting:
                return False
            by_address = Counter(g.address for g in waiting)
            most = max(by_address, key=lambda address: by_address[address])
            next(g for g in waiting if g.address == most).evict()
        self.guards[guard.transport] = guard
        return True

    def refusal(self, request: web.Request) -> web.Response | str:
        """The response that refuses `request`, or the role it gets. The token is checked
        before any penalty: the right one always gets in. A refused request's connection
        is closed once it has its answer."""
        refused = self._refusal(request)
        if isinstance(refused, web.Response):
            refused.force_close()
            return refused
        guard = self.guards.get(request.transport)
        if guard is not None:
            guard.authenticated = True
        return refused

    def _refusal(self, request: web.Request) -> web.Response | str:
        host = request.headers.get(hdrs.HOST, "").lower()
        if host not in self.hosts and not (self.loopback and is_loopback_name(host)):
            return _refuse(403, f"Host {host!r} is not a name this host listens on")
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and origin not in self.origins:
            return _refuse(
                403,
                f"Origin {origin!r} is not allowed "
                "(to allow one: acpctl serve --allow-origin ORIGIN)",
            )
        scheme, _, presented = request.headers.get(hdrs.AUTHORIZATION, "").partition(" ")
        role = self.tokens.role_of(presented.strip()) if scheme.lower() == "bearer" else None
        if role is not None:
            return role
        # Failing requests only are limited: a 256-bit token is not guessed, and a limit
        # that barred the right token too would only help whoever fails on purpose.
        peer = request.remote or "?"
        now = time.monotonic()
        failures = self.failures.setdefault(peer, deque())
        while failures and now - failures[0] > FAILURE_WINDOW_S:
            failures.popleft()
        if len(failures) >= MAX_FAILURES:
            return _refuse(429, "too many failed authentications; try again later")
        failures.append(now)
        if len(self.failures) > MAX_REMEMBERED_ADDRESSES:  # many addresses: forget the old
            for address, times in list(self.failures.items()):
                if now - times[-1] > FAILURE_WINDOW_S:
                    del self.failures[address]
        response = _refuse(401, "a bearer token is required (acpctl serve --show-token)")
        response.headers[hdrs.WWW_AUTHENTICATE] = 'Bearer realm="acpctl"'
        return response


def _refuse(status: int, why: str) -> web.Response:
    return web.json_response({"error": why}, status=status)


def make_app(
    pool: AgentPool, door: Door, connections: Connections, log: logging.Logger
) -> web.Application:

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await answer(request)
        finally:  # kept alive, the connection's next request has the same deadline
            guard = door.guards.get(request.transport)
            if guard is not None:
                guard.expect_headers()

    async def answer(request: web.Request) -> web.StreamResponse:
        decided = door.refusal(request)
        if isinstance(decided, web.Response):
            log.info("refused %s %s: %d", request.method, request.path, decided.status)
            return decided
        role = decided
        agent = request.match_info.get("agent")
        if request.method == "GET" and request.headers.get(hdrs.UPGRADE, "").lower() == "websocket":

            async def new_connection(connection_id: str, link: bool) -> LogicalConnection:
                return await connections.open(agent, role, connection_id, link=link)

            try:
                await pool.get(agent)  # an unknown agent is refused before the upgrade
            except AgentChanged as exc:
                return _refuse(409, str(exc))
            except AcpctlError as exc:
                return _refuse(404, str(exc))
            return await serve_socket(
                request,
                new_connection,
                lambda connection_id: connections.find(connection_id, role),
                MAX_MESSAGE_BYTES,
                KEEPALIVE_S,
                log,
            )
        return await streamable.handle(request, connections, agent, role, log, door.body_timeout_s)

    async def closing(app: web.Application) -> None:
        await connections.close()

    app = web.Application(client_max_size=MAX_MESSAGE_BYTES)
    for path in (ENDPOINT, ENDPOINT + "/{agent}"):
        app.router.add_route("*", path, handle)
    app.on_shutdown.append(closing)
    return app


class SlowHeadersGuard(asyncio.Protocol):
    """Wraps the HTTP server's protocol for one TCP connection: admitted by the door (which
    may evict an unauthenticated connection for it), closed when a request's headers have
    not arrived within the door's header timeout (the first request's, and each later
    one's on a kept-alive connection: `expect_headers`)."""

    def __init__(self, inner: Any, door: Door) -> None:
        self._inner = inner
        self._door = door
        self._seen = b""
        self._timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.authenticated = False  # a request on it passed the door
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self._door.admit(self):
            transport.close()
            return
        self._admitted = True
        self.expect_headers()
        self._inner.connection_made(transport)

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
        if self._timer is not None:
            self._seen = (self._seen + data)[-(16 << 10) :]
            if b"\r\n\r\n" in self._seen:
                self._timer.cancel()
                self._timer = None
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        result: bool | None = self._inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._admitted:
            self._door.guards.pop(self.transport, None)
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()
