"""Backends: how acpctl talks to the real agent. `runner.connection` builds one and hands
it to the server, which sees every backend as one ACP agent through the interface below.

To add a backend: implement `Backend` (requests out, the agent's messages in through the
`AgentEvents` sink given to `connect`), and pick it in `runner.connection.build_backend`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from acpctl.jsonrpc import JsonObject, ResponseHook
from acpctl.runner.handshake import Handshake


class AgentEvents(Protocol):
    """What a backend tells the server about the agent (implemented by `FromAgent`)."""

    def on_agent_request(self, message: JsonObject, generation: int) -> None: ...
    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None: ...
    async def on_agent_batch_end(self) -> None: ...
    def on_agent_exit(self, description: str, generation: int) -> None: ...


class Backend(Protocol):
    # Bumped at every (re)start: what the server attached under an older generation must
    # be attached again.
    generation: int
    alive: bool

    def connect(self, events: AgentEvents, handshake: Handshake) -> None:
        """The server's sink for the agent's messages, and the connection's handshake,
        which a restarted agent must accept before it is used."""
        ...

    @property
    def pid(self) -> int | None: ...
    async def ensure_running(self) -> None: ...
    def call(
        self,
        method: str,
        params: Any,
        on_response: ResponseHook | None = None,
    ) -> asyncio.Future[JsonObject]:
        """Send a request; the future resolves to the agent's whole response message.
        `on_response` runs with the response before the future resolves, whoever made it
        (the agent, or acpctl for it: the agent died, is not running, took too long, or
        acpctl settled it at shutdown), and for the agent's own before its next message
        is routed (runner/replies.py relies on this)."""
        ...

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> Any:
        """The id a pending call has on the agent's hop (for $/cancel_request)."""
        ...

    def notify(self, method: str, params: Any) -> None: ...
    def send(self, message: JsonObject) -> None:
        """A response to one of the agent's requests, with the agent's id."""
        ...

    def settle_pending(self, method: str, response: JsonObject) -> None: ...
    async def warm_up(self, cwd: str) -> None:
        """Made ready, ahead, for the next session/new in `cwd` (the session host's spare):
        what can be started without opening a session."""
        ...

    async def stop(self) -> None: ...
