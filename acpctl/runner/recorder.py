"""Everything `run --acp` writes to the history store: a session's metadata when it opens,
the user's prompt (as user_message_chunk updates) and the title it gives, the agent's
updates as their own bytes, the end of each turn, and the last flush when it closes.

Appends are buffered per session and written once per batch of agent output; a turn's end
is fsynced before the editor sees the prompt's response.
"""

from __future__ import annotations

from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.session import SessionRecord
from acpctl.store.sessions import (
    DiscardedHistory,
    HistoryWriter,
    SessionMeta,
    SessionStore,
    title_from_prompt,
    utc_now,
)


class Recorder:
    def __init__(
        self, store: SessionStore, agent_name: str, command: list[str], enabled: bool = True
    ) -> None:
        self.store = store
        self.agent_name = agent_name
        self.command = command
        self.enabled = enabled
        self._dirty: set[HistoryWriter] = set()

    def create(
        self, session_id: str, agent_session_id: str, cwd: str, additional_directories: list[str]
    ) -> tuple[SessionMeta, HistoryWriter]:
        meta = SessionMeta(
            id=session_id,
            agent=self.agent_name,
            command=self.command,
            cwd=cwd,
            additional_directories=additional_directories,
            agent_session_id=agent_session_id,
        )
        return meta, self.store.create(meta) if self.enabled else DiscardedHistory()

    def reopen(self, session_id: str) -> tuple[SessionMeta, HistoryWriter]:
        return self.store.read_meta(session_id), self.store.open_writer(session_id)

    def prompt(self, record: SessionRecord, prompt: list[Any]) -> None:
        """The user's prompt, written before the agent sees it."""
        for block in prompt:
            record.writer.update({"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": block})
        if record.meta.title is None:
            record.meta.title = title_from_prompt(prompt)
        record.writer.flush()

    def agent_update(self, record: SessionRecord, update: JsonObject, raw: bytes) -> None:
        record.writer.agent_message(raw)
        self._dirty.add(record.writer)
        if update.get("sessionUpdate") == acp.SESSION_INFO_UPDATE and "title" in update:
            record.meta.title = update["title"]

    def batch_end(self) -> None:
        for writer in self._dirty:
            writer.flush()
        self._dirty.clear()

    def turn_end(self, record: SessionRecord, response: JsonObject) -> None:
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("stopReason"), str):
            record.writer.turn_end(result["stopReason"])
            record.meta.turns += 1
            record.meta.last_stop_reason = result["stopReason"]
        else:
            error = response.get("error")
            message = error.get("message", "no result") if isinstance(error, dict) else None
            record.writer.turn_error(str(message or "no result"))
        record.writer.sync()
        self.save(record)

    def save(self, record: SessionRecord, touch: bool = True) -> None:
        if touch:
            record.meta.updated = utc_now()
        if not isinstance(record.writer, DiscardedHistory):
            self.store.write_meta(record.meta)

    def close(self, record: SessionRecord) -> None:
        self._dirty.discard(record.writer)
        record.writer.close()
