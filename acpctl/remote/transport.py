"""What the link (remote/link.py) needs of a transport, whichever carries it: ACP's
WebSocket profile (remote/websocket.py), its Streamable HTTP profile (remote/streamable.py),
or JSON-RPC lines to a session host's unix socket, on this machine or through
`ssh HOST acpctl serve --bridge` (remote/lines.py).

A transport is opened new, or resuming a connection the host still holds (by its id and
the last cursor received); it then carries text messages both ways until it drops. Opening
raises LinkDown for what a retry may cure (no route, a refused or dropped connection, a
timeout), LinkRefused for what it will not (a wrong token, an unknown agent, no acpctl on
the remote), and ResumeRefused when the host no longer holds the connection."""

from __future__ import annotations

from typing import Any, Protocol

from acpctl.jsontext import decode_text

OPEN_TIMEOUT_S = 15.0
NOTHING_YET = "0"  # the cursor of a client that has had nothing (acpctl serve's convention)


class LinkDown(Exception):
    """The link is down now; trying again may bring it back."""


class NoSuchHost(LinkDown):
    """The remote's name does not resolve. Before the link was ever up that is a typo, said
    at once; after, the network went away, and a retry may bring it back."""


class LinkRefused(Exception):
    """The remote said no in a way no retry changes; the message says what to fix."""


class ResumeRefused(Exception):
    """The remote no longer holds the connection (or never could resume it)."""


class ResumePoint:
    """Where a later transport resumes a connection from. (A plain class: the thin
    client's start imports this module.)"""

    __slots__ = ("connection_id", "cursors", "streams")

    def __init__(
        self, connection_id: str, cursors: dict[str, str], streams: list[str] | None = None
    ) -> None:
        self.connection_id = connection_id
        self.cursors = cursors  # stream -> the last cursor received on it ("": all of them)
        self.streams = streams  # the streams to resume (Streamable HTTP's)


class Transport(Protocol):
    connection_id: str
    resumed: bool  # opened by resuming a held connection
    remote_version: str | None  # the acpctl at the other end, when the transport says

    @property
    def close_reason(self) -> str:
        """Why it dropped, said in a few words."""
        ...

    async def send(self, text: str) -> None: ...

    async def receive(self) -> str | None:
        """The next message; None once the transport has dropped."""
        ...

    def took(self, cursor: str) -> None:
        """The link has taken the message that carried `cursor`: a resume starts after it."""
        ...

    def resume_point(self) -> ResumePoint | None:
        """Where a later transport could resume this connection from; None: it cannot."""
        ...

    def peer_certificate(self) -> dict[str, Any] | None:
        """The TLS certificate the remote presented (as `ssl` gives it), if any."""
        ...

    async def close(self, leaving: bool) -> None:
        """End it; `leaving`: the client has gone for good (the host may end the
        connection), else it is a drop that a resume may follow."""
        ...


def decoded(text: bytes | str) -> dict[str, Any] | None:
    """`text` as a JSON object, with acpctl's one decoder; None for anything else."""
    try:
        value = decode_text(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def json_object(text: str) -> dict[str, Any]:
    """`text` as a JSON object; {} for anything else (the callers look for a key)."""
    return decoded(text) or {}
