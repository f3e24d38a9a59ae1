"""The sessions open on one connection: each one's record (seed 002: the single owner of
its prompt, permission requests, agent handle and history writer; every event is routed by
its owner first), and the table that finds a record by the editor's id or the agent's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.clients import Client
from acpctl.runner.state import SessionState
from acpctl.store.lines import StoredAt
from acpctl.store.sessions import (
    InvalidSessionId,
    SessionMeta,
    checked_session_id,
    valid_session_id,
)
from acpctl.store.writer import HistoryWriter


@dataclass(eq=False)  # compared, and hashed, by identity
class SessionRecord:
    meta: SessionMeta
    writer: HistoryWriter
    # cwd, mcpServers, additionalDirectories: re-sent to the agent when reattaching.
    # Kept in memory only: mcpServers may carry secrets in their env.
    attach_params: JsonObject = field(default_factory=dict)
    generation: int = 0  # the agent generation this session is attached to (0: none)
    suppress_replay: bool = False  # while the agent replays a session/load we asked for
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # held while attaching
    heard: float = 0.0  # when the agent last said something about it (the watchdog's clock)
    # The agent's last available_commands_update: sent again to a client that resumes the
    # session while it is open (the agent says it once, at the start).
    commands: JsonObject | None = None
    # What the agent's last answer establishing it (new, load, resume) carried beyond its
    # state (its _meta, its own fields; sessionId as acpctl's): a later answer from
    # acpctl's state keeps them, as the agent's own would.
    carried: JsonObject = field(default_factory=dict)
    # What the agent said about a new session before the editor got the answer naming it:
    # relayed right after that answer (None once it is sent).
    unannounced: list[bytes] | None = None
    # The clients that see it, and each one's role (acp.CONTROLLER or acp.OBSERVER).
    clients: dict[Client, str] = field(default_factory=dict)
    state: SessionState = field(init=False)

    def __post_init__(self) -> None:
        self.state = SessionState(self.meta.state)

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def agent_session_id(self) -> str | None:
        return self.meta.agent_session_id

    def write(self, line: bytes, message: Any = None, recorded: bool = False) -> None:
        """To every client that sees the session (held while the answer naming it is on
        its way); `message`: what the line decodes to, when the server has it; `recorded`:
        the line is the one the history writer took last, as it is (see stored_last)."""
        if self.unannounced is not None:
            self.unannounced.append(line)
            return
        for client in self.clients:
            if message is None:
                client.channel.write(line)
            else:
                client.channel.relay(line, message, self if recorded else None)

    def stored_last(self) -> StoredAt | None:
        """Where the agent line the history writer took last is in the session's history."""
        return self.writer.last_agent_line(self.id)

    def announced(self) -> None:
        """The client has the answer that names this session: what was held goes now."""
        held, self.unannounced = self.unannounced, None
        for line in held or ():
            self.write(line)

    def controllers(self) -> list[Client]:
        return [client for client, role in self.clients.items() if role == acp.CONTROLLER]

    def sees(self, client: Client) -> bool:
        return client in self.clients

    def to_agent(self, params: JsonObject) -> JsonObject:
        """`params` with the agent's id for this session."""
        return {**params, "sessionId": self.agent_session_id}


class SessionTable:
    def __init__(self, on_change: Callable[[], None]) -> None:
        self.by_id: dict[str, SessionRecord] = {}
        self.by_agent_id: dict[str, SessionRecord] = {}
        self._on_change = on_change  # the run record lists the open sessions

    def add(self, record: SessionRecord) -> None:
        self.by_id[record.id] = record
        if record.agent_session_id:
            self.by_agent_id[record.agent_session_id] = record
        self._on_change()

    def remove(self, record: SessionRecord) -> None:
        self.by_id.pop(record.id, None)
        self.unbind(record)
        self._on_change()

    def bind(self, record: SessionRecord, agent_session_id: str) -> None:
        """Route the agent's messages for `agent_session_id` to `record`."""
        self.by_agent_id[agent_session_id] = record

    def unbind(self, record: SessionRecord) -> None:
        agent_id = record.agent_session_id
        if agent_id and self.by_agent_id.get(agent_id) is record:
            del self.by_agent_id[agent_id]

    def get(self, session_id: Any) -> SessionRecord | None:
        return self.by_id.get(session_id) if isinstance(session_id, str) else None

    def of_agent(self, agent_session_id: Any) -> SessionRecord | None:
        if not isinstance(agent_session_id, str):
            return None
        return self.by_agent_id.get(agent_session_id)

    def require(
        self, params: JsonObject, stored: Callable[[str], bool], client: Client
    ) -> SessionRecord:
        """The open session `params` names that `client` sees, or the error it gets."""
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise RpcError(acp.INVALID_PARAMS, "sessionId is required")
        record = self.by_id.get(session_id)
        if record is None or not record.sees(client):
            raise not_found(
                wire_session_id(session_id),
                "; load or resume it first" if stored(session_id) else "",
            )
        return record

    def __iter__(self) -> Iterator[SessionRecord]:
        return iter(list(self.by_id.values()))

    def ids(self) -> list[str]:
        return sorted(self.by_id)


def wire_session_id(session_id: Any) -> str:
    """A session id from the wire that may name a directory; else the editor's error."""
    try:
        return checked_session_id(session_id)
    except InvalidSessionId as exc:
        raise RpcError(acp.INVALID_PARAMS, str(exc)) from None


def not_found(session_id: Any, hint: str = "") -> RpcError:
    """The error for a session the connection cannot find (-32002, the id in its data)."""
    return RpcError(
        acp.RESOURCE_NOT_FOUND, f"session not found: {session_id}{hint}", {"sessionId": session_id}
    )


def fresh_session_id() -> str:
    """A new session id of acpctl's."""
    import uuid

    return uuid.uuid4().hex


def client_session_id(
    agent_id: str, stored: Callable[[str], bool], open_now: Callable[[str], object]
) -> str:
    """The id the editor knows a new session by: the agent's own, unless it cannot name a
    directory or is taken (in the history, or open)."""
    if not valid_session_id(agent_id) or stored(agent_id) or open_now(agent_id) is not None:
        return fresh_session_id()
    return agent_id
