"""Everything `run --acp` writes to the history store: a session's metadata when it opens,
the user's prompt (as user_message_chunk updates) and the title it gives, the agent's
updates as their own bytes, the end of each turn, and the last flush when it closes.

Appends are buffered per session and written once per batch of agent output; a turn's end
is fsynced before the editor sees the prompt's response.

A failure to write (a full disk, a failing device) never stops the relay: it is logged once,
the session's events stay buffered in memory, and every later flush tries again, so the
history is complete once space returns (unless acpctl ends before that). A session whose
directory cannot even be created runs without history, said in the log.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable
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
        self,
        store: SessionStore,
        agent_name: str,
        command: list[str],
        log: logging.Logger,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.agent_name = agent_name
        self.command = command
        self.log = log
        self.enabled = enabled
        self._dirty: dict[str, HistoryWriter] = {}  # session id -> writer with unwritten events
        self._failing: set[tuple[str, str]] = set()  # (session, what) whose last write failed

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
        if not self.enabled:
            return meta, DiscardedHistory()
        try:
            return meta, self.store.create(meta)
        except OSError as exc:
            self.log.warning("session %s runs without history: %s", session_id, _reason(exc))
            return meta, DiscardedHistory()

    def fork(
        self,
        parent: SessionRecord,
        session_id: str,
        agent_session_id: str | None,
        cwd: str,
        additional_directories: list[str],
    ) -> tuple[SessionMeta, HistoryWriter]:
        """A session forked from `parent`: its history so far, its title, turns and the
        user's choices of mode and options, with the parent named."""
        meta = SessionMeta(
            id=session_id,
            agent=self.agent_name,
            command=self.command,
            cwd=cwd,
            additional_directories=additional_directories,
            agent_session_id=agent_session_id,
            title=parent.meta.title,
            turns=parent.meta.turns,
            parent_id=parent.id,
            state=copy.deepcopy(parent.meta.state),
        )
        if not self.enabled or isinstance(parent.writer, DiscardedHistory):
            return meta, DiscardedHistory()
        self._write(parent.id, "events", parent.writer.flush)
        try:
            return meta, self.store.fork(parent.id, meta)
        except OSError as exc:
            self.log.warning("fork %s runs without history: %s", session_id, _reason(exc))
            with contextlib.suppress(OSError):
                self.store.delete(session_id)  # no half-copied history left behind
            return meta, DiscardedHistory()

    def reopen(self, session_id: str) -> tuple[SessionMeta, HistoryWriter]:
        return self.store.read_meta(session_id), self.store.open_writer(session_id)

    def prompt(self, record: SessionRecord, prompt: list[Any]) -> None:
        """The user's prompt, written before the agent sees it."""
        for block in prompt:
            record.writer.update({"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": block})
        if record.meta.title is None:
            record.meta.title = title_from_prompt(prompt)
        self._write(record.meta.id, "events", record.writer.flush)

    def agent_update(self, record: SessionRecord, update: JsonObject, raw: bytes) -> None:
        record.writer.agent_message(raw)
        self._dirty[record.id] = record.writer
        if update.get("sessionUpdate") == acp.SESSION_INFO_UPDATE and "title" in update:
            record.meta.title = update["title"]

    def batch_end(self) -> None:
        for session_id, writer in self._dirty.items():
            self._write(session_id, "events", writer.flush)
        self._dirty.clear()

    def turn_end(self, record: SessionRecord, response: JsonObject) -> None:
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("stopReason"), str):
            record.writer.turn_end(result["stopReason"])
            record.meta.last_stop_reason = result["stopReason"]
        else:
            error = response.get("error")
            message = error.get("message", "no result") if isinstance(error, dict) else None
            record.writer.turn_error(str(message or "no result"))
        self._write(record.meta.id, "events", record.writer.sync)
        self.save(record, turn_ended=True)

    def save(self, record: SessionRecord, touch: bool = True, turn_ended: bool = False) -> None:
        """The session's metadata; `turn_ended` counts one more turn (merged with what
        another process recorded in the meantime)."""
        if touch:
            record.meta.updated = utc_now()
        if isinstance(record.writer, DiscardedHistory):
            record.meta.turns += int(turn_ended)
            return
        self._write(
            record.meta.id, "metadata", lambda: self.store.record_meta(record.meta, turn_ended)
        )

    def close(self, record: SessionRecord) -> None:
        self._dirty.pop(record.id, None)
        self._write(record.meta.id, "events", record.writer.close)

    def _write(self, session_id: str, what: str, write: Callable[[], None]) -> None:
        """Run one write of a session's events or metadata; a failure is logged (once until
        it heals), never raised: the relay goes on, and what is buffered waits for the next
        write."""
        key = (session_id, what)
        try:
            write()
        except OSError as exc:
            if key not in self._failing:
                self._failing.add(key)
                self.log.warning(
                    "cannot write the %s of session %s (%s); acpctl keeps them in memory and "
                    "retries with every update",
                    what,
                    session_id,
                    _reason(exc),
                )
            return
        if key in self._failing:
            self._failing.discard(key)
            self.log.warning("the %s of session %s are written again", what, session_id)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
