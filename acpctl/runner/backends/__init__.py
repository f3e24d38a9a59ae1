"""Backends: how acpctl talks to the real agent (native ACP relay, pi's RPC).

Both present the same surface to the server, as if each were one ACP agent.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from acpctl.jsonrpc import JsonObject


class Backend(Protocol):
    generation: int
    alive: bool
    agent_capabilities: JsonObject
    initialize_params: JsonObject | None
    authenticate_params: JsonObject | None

    @property
    def pid(self) -> int | None: ...
    async def ensure_running(self) -> None: ...
    def call(self, method: str, params: Any, on_response: Any = None,
             ) -> asyncio.Future[JsonObject]: ...
    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None: ...
    def notify(self, method: str, params: Any) -> None: ...
    def send(self, message: JsonObject) -> None: ...
    def settle_pending(self, method: str, response: JsonObject) -> None: ...
    async def stop(self) -> None: ...
