"""One editor-facing session: the single owner of its prompt, permissions, agent handle
and history writer (seed 002: every event is routed by its owner first)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from acpctl.jsonrpc import JsonObject
from acpctl.store.sessions import HistoryWriter, SessionMeta


@dataclass
class SessionRecord:
    meta: SessionMeta
    writer: HistoryWriter
    # cwd, mcpServers, additionalDirectories: re-sent to the agent when reattaching.
    # Kept in memory only: mcpServers may carry secrets in their env.
    attach_params: JsonObject = field(default_factory=dict)
    generation: int = 0  # the agent generation this session is attached to (0: none)
    prompt_future: asyncio.Future[JsonObject] | None = None
    permission_requests: set[int] = field(default_factory=set)  # editor-hop ids
    suppress_replay: bool = False  # while the agent replays a session/load we asked for
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    attach_result: Any = None

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def agent_session_id(self) -> str | None:
        return self.meta.agent_session_id

    @property
    def prompting(self) -> bool:
        return self.prompt_future is not None
