"""The host's door: what every request on TCP must pass, in this order. Its Host must be
one of the listening names (against DNS rebinding). Its Origin must be an allowed one, or
the host's own page's; no other web page can drive an agent. It needs a credential: a
bearer token, whose role the client gets, or, from the host's own page on its own origin
exactly, a paired device's cookie and the key its page holds (host/devices.py). And it
must stay within the limits on failed authentications and on connections. (The unix
socket, host/unix.py, has its permissions for all of it.) docs/remote.md and docs/web.md
say what each check stops."""

from __future__ import annotations

import contextlib
import ssl
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import hdrs, web

from acpctl import protocol as acp
from acpctl.config import is_loopback_name
from acpctl.host.devices import Devices
from acpctl.host.registry import Caller
from acpctl.host.tokens import Tokens

# Failed authentications: past this many from one address in the window, 429 until it ends.
MAX_FAILURES = 10
FAILURE_WINDOW_S = 60.0
MAX_REMEMBERED_ADDRESSES = 4096
# Connections that have not authenticated yet (every new one, until its first request has
# passed the door): at most this many from one address, so that a client's own burst (a
# page's tabs, a link's reconnects) fits. Past it, or when the host is full, one of them
# is closed to make way: from the address that holds most, the oldest that has sent
# nothing, and only when every one has begun its request, the oldest of those. A socket
# whose request has begun to arrive is never closed for one that is idle, so a client with
# the token gets in though a flood shares its address (an ssh forward, a proxy: everyone
# is 127.0.0.1 there).
MAX_UNAUTHENTICATED_PER_ADDRESS = 256
# File descriptors kept out of the connections' reach: the agents' pipes, the history's
# files, and the sockets accepted in one batch before the door has seen them.
RESERVED_DESCRIPTORS = 256
HEADER_TIMEOUT_S = 10.0  # a request's headers (every request's) must arrive within this
BODY_TIMEOUT_FACTOR = 3  # and its body within three times that


class Guard(Protocol):
    """A TCP connection as the door sees it (http.SlowHeadersGuard)."""

    address: str
    authenticated: bool
    transport: Any

    def begun(self) -> bool: ...
    def evict(self) -> None: ...
    def expect_headers(self) -> None: ...


def connection_capacity() -> int:
    """How many TCP connections the host holds at once: what its file descriptors allow
    (raise_file_limit first), less those kept for the rest of its work."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 16
    return max(64, min(soft, 1 << 16) - RESERVED_DESCRIPTORS)


def raise_file_limit() -> None:
    """The soft limit on open files raised to the hard one (a desktop's soft default is
    1,024): every connection is a descriptor."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Door:
    """What one listener checks."""

    tokens: Tokens
    hosts: frozenset[str] = frozenset()  # Host header values accepted (lowercase)
    # A loopback listener: a loopback name on any port passes too (an `ssh -L` forward or a
    # local proxy on another port; a DNS-rebinding page can only use a name that is not).
    loopback: bool = False
    origins: frozenset[str] = frozenset()  # Origin values accepted
    devices: Devices | None = None  # the paired devices, whose cookie the page sends
    secure: bool = False  # served over TLS (its own, or a proxy's): the page is https
    failures: dict[str, deque[float]] = field(default_factory=dict)  # by address
    # The TCP connections open, oldest first, by their transport (SlowHeadersGuard).
    guards: dict[Any, Guard] = field(default_factory=dict)
    header_timeout_s: float = HEADER_TIMEOUT_S  # `acpctl serve --header-timeout`
    capacity: int = field(default_factory=connection_capacity)  # TCP connections at once
    # The listener's own TLS (--tls-cert): each connection's handshake is done under the
    # door, so a socket that never finishes one is counted, limited and timed like any.
    tls: ssl.SSLContext | None = None

    @property
    def body_timeout_s(self) -> float:
        """A request's body is due within this of its headers."""
        return BODY_TIMEOUT_FACTOR * self.header_timeout_s

    @property
    def connections(self) -> int:
        return len(self.guards)

    def admit(self, guard: Guard) -> bool:
        """Room for a new connection: an unauthenticated one of its address, or of all,
        makes way when those are at their limit (_make_way). False: every place is held by
        an authenticated client."""
        waiting = [g for g in self.guards.values() if not g.authenticated]  # oldest first
        same_address = [g for g in waiting if g.address == guard.address]
        if len(same_address) >= MAX_UNAUTHENTICATED_PER_ADDRESS:
            _make_way(same_address)
        elif self.connections >= self.capacity:
            if not waiting:
                return False
            by_address = Counter(g.address for g in waiting)
            most = max(by_address, key=lambda address: by_address[address])
            _make_way([g for g in waiting if g.address == most])
        self.guards[guard.transport] = guard
        return True

    def secured(self, raw: Any, guard: Guard) -> None:
        """A connection's TLS handshake is done: known by its new transport from now on."""
        if self.guards.pop(raw, None) is not None:
            self.guards[guard.transport] = guard

    @property
    def cookie(self) -> str:
        """The device cookie's name: under TLS with the __Host- prefix, which a browser
        keeps only when it is Secure, for the whole host, and set by the host itself."""
        return "__Host-acpctl-device" if self.secure else "acpctl-device"

    def page_origin(self, request: web.Request) -> str:
        """The origin the host's own page has when `request` comes to it: the scheme, and
        the Host exactly as the browser sent it (name and port)."""
        return f"{'https' if self.secure else 'http'}://{request.headers.get(hdrs.HOST, '')}"

    def host_refusal(self, request: web.Request) -> web.Response | None:
        """403 for a Host that is none of the names the host listens on (DNS rebinding)."""
        host = request.headers.get(hdrs.HOST, "").lower()
        if host not in self.hosts and not (self.loopback and is_loopback_name(host)):
            return refuse(403, f"Host {host!r} is not a name this host listens on")
        return None

    def failed(self, request: web.Request) -> web.Response | None:
        """A failed authentication counted; 429 once its address has failed too often."""
        peer = request.remote or "?"
        now = time.monotonic()
        failures = self.failures.setdefault(peer, deque())
        while failures and now - failures[0] > FAILURE_WINDOW_S:
            failures.popleft()
        if len(failures) >= MAX_FAILURES:
            return refuse(429, "too many failed authentications; try again later")
        failures.append(now)
        if len(self.failures) > MAX_REMEMBERED_ADDRESSES:  # many addresses: forget the old
            for address, times in list(self.failures.items()):
                if now - times[-1] > FAILURE_WINDOW_S:
                    del self.failures[address]
        return None

    def refusal(self, request: web.Request) -> web.Response | Caller:
        """The response that refuses `request`, or who it comes from. The credential is
        checked before any penalty: the right one always gets in. A refused request's
        connection is closed once it has its answer."""
        refused = self._refusal(request)
        if isinstance(refused, web.Response):
            refused.force_close()
            return refused
        guard = self.guards.get(request.transport)
        if guard is not None:
            guard.authenticated = True
        return refused

    def _refusal(self, request: web.Request) -> web.Response | Caller:
        refused = self.host_refusal(request)
        if refused is not None:
            return refused
        origin = request.headers.get(hdrs.ORIGIN)
        from_page = origin is not None and origin == self.page_origin(request)
        if origin is not None and not from_page and origin not in self.origins:
            return refuse(
                403,
                f"Origin {origin!r} is not allowed "
                "(to allow one: acpctl serve --allow-origin ORIGIN)",
            )
        scheme, _, presented = request.headers.get(hdrs.AUTHORIZATION, "").partition(" ")
        role = self.tokens.role_of(presented.strip()) if scheme.lower() == "bearer" else None
        if role is not None:
            return Caller(role)
        # The device cookie counts only from the host's own page: a browser sends it to
        # this host from any page, which is why SameSite and the Origin both are checked.
        # And only with the key the page's origin holds: a program that took the cookie
        # (another server on this machine, which a browser sends it to) forges an Origin.
        credential = request.cookies.get(self.cookie) if from_page else None
        device = (
            self.devices.device_of(credential, device_key(request))
            if self.devices and credential
            else None
        )
        if device is not None:
            self.devices.seen(device)  # type: ignore[union-attr]
            return Caller(device.role, device.name)
        # Failing requests only are limited: a 256-bit credential is not guessed, and a
        # limit that barred the right one too would only help whoever fails on purpose.
        limited = self.failed(request)
        if limited is not None:
            return limited
        if from_page:
            return refuse(401, "this device is not paired (acpctl host pair)")
        response = refuse(401, "a bearer token is required (acpctl host show-token)")
        response.headers[hdrs.WWW_AUTHENTICATE] = 'Bearer realm="acpctl"'
        return response


def _make_way(waiting: list[Guard]) -> None:
    """Close one of `waiting` (unauthenticated, oldest first): the oldest that has sent
    nothing, else the oldest."""
    next((g for g in waiting if not g.begun()), waiting[0]).evict()


def device_key(request: web.Request) -> str:
    """The key a page presents with its device's cookie: in its header, or as a WebSocket
    subprotocol (a browser's socket can set no header); "" when it presents none."""
    said = request.headers.get(acp.DEVICE_KEY_HEADER)
    if said:
        return said
    for offered in request.headers.get(hdrs.SEC_WEBSOCKET_PROTOCOL, "").split(","):
        offered = offered.strip()
        if offered.startswith(acp.WEBSOCKET_DEVICE_KEY):
            return offered.removeprefix(acp.WEBSOCKET_DEVICE_KEY)
    return ""


def refuse(status: int, why: str) -> web.Response:
    """A refusal, with the reason in JSON."""
    return web.json_response({"error": why}, status=status)
