"""Everything `run --acp` writes to the history store: a session's metadata when it opens,
the user's prompt (as user_message_chunk updates) and the title it gives, the agent's
updates as their own bytes, the end of each turn, and the last flush when it closes.

Appends are buffered per session and written to the OS once per batch of agent output, and
a turn's end before the editor sees the prompt's response: a crash or kill of acpctl loses
nothing. What makes them durable on disk is off the response's path: a group commit,
COMMIT_DELAY_S after the first turn that needs one, fsyncs the events of every session
that ended a turn meanwhile and rewrites their metadata (turns, time, title, state), in a
worker thread. Closing a session commits at once. A power loss can lose what the last
COMMIT_DELAY_S wrote.

A failure to write (a full disk, a failing device) never stops the relay: it is logged once,
the session's events stay buffered in memory, and every later flush tries again, so the
history is complete once space returns (unless acpctl ends before that). A session whose
directory cannot even be created runs without history, said in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.session import SessionRecord
from acpctl.store.lines import CorruptSession
from acpctl.store.sessions import SessionMeta, SessionStore, title_from_prompt, utc_now
from acpctl.store.writer import DeferredHistory, DiscardedHistory, HistoryWriter

# How long a group commit waits for more turns to end before it syncs them all. Not less:
# each commit slows the turns beside it (its worker shares the interpreter with the relay,
# for three fsyncs and a dozen other system calls), and commits 50 ms apart made a short
# turn's median 1.6 ms instead of 1.1 (docs/reliability.md).
COMMIT_DELAY_S = 0.5


# What a recorded elicitation keeps of elicitation/create's params.
ELICITATION_KEYS = ("mode", "message", "requestedSchema", "url", "elicitationId", "toolCallId")


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
        self._due: dict[str, SessionRecord] = {}  # waiting for the next group commit
        self._turns_due: Counter[str] = Counter()  # turns ended since the metadata was written
        self._committer: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()  # set: the commit under way is not to wait

    def create(
        self, session_id: str, agent_session_id: str, cwd: str, additional_directories: list[str]
    ) -> tuple[SessionMeta, HistoryWriter]:
        meta = self._meta(session_id, agent_session_id, cwd, additional_directories)
        return meta, self._history(meta, self.store.create)

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
        meta = self._meta(session_id, agent_session_id, cwd, additional_directories)
        meta.title, meta.turns, meta.parent_id = parent.meta.title, parent.meta.turns, parent.id
        meta.state = copy.deepcopy(parent.meta.state)
        if isinstance(parent.writer, DiscardedHistory):
            return meta, DiscardedHistory()
        self._write(parent.id, "events", parent.writer.flush)
        return meta, self._history(meta, lambda made: self.store.fork(parent.id, made))

    def subagent(
        self,
        parent: SessionRecord,
        session_id: str,
        agent_session_id: str,
        cwd: str,
        title: str | None,
    ) -> tuple[SessionMeta, HistoryWriter]:
        """A subagent's session, which `parent`'s agent announced (with its parent's title
        for it): a history of its own, linked to its parent's."""
        meta = self._meta(session_id, agent_session_id, cwd, [])
        meta.subagent_of, meta.title = parent.id, title
        if isinstance(parent.writer, DiscardedHistory):
            return meta, DiscardedHistory()
        return meta, self._history(meta, self.store.create)

    def _meta(
        self,
        session_id: str,
        agent_session_id: str | None,
        cwd: str,
        additional_directories: list[str],
    ) -> SessionMeta:
        return SessionMeta(
            id=session_id,
            agent=self.agent_name,
            command=self.command,
            cwd=cwd,
            additional_directories=additional_directories,
            agent_session_id=agent_session_id,
        )

    def _history(
        self, meta: SessionMeta, open_history: Callable[[SessionMeta], HistoryWriter]
    ) -> HistoryWriter:
        """The session's writer. When its files cannot be created (a full disk), nothing
        half-made is left in the store and the writer keeps the events in memory, creating
        the files at a later flush: the session is recorded once space returns (said in the
        log), unless acpctl ends before."""
        if not self.enabled:
            return DiscardedHistory()
        try:
            return open_history(meta)
        except OSError as exc:
            self.log.warning(
                "cannot create the history of session %s (%s); acpctl keeps its events in "
                "memory and records it when it can",
                meta.id,
                _reason(exc),
            )
            with contextlib.suppress(OSError):
                self.store.delete(meta.id)
            # Logged once: the first write that works says "written again".
            self._failing.add((meta.id, "events"))
            # The files are made from the metadata as it is now: the turns ended meanwhile
            # are added by the group commits that failed until then, as for any session.
            made = _snapshot(meta)
            return DeferredHistory(lambda: open_history(made))

    def reopen(self, session_id: str) -> tuple[SessionMeta, HistoryWriter]:
        return self.store.read_meta(session_id), self.store.open_writer(session_id)

    def prompt(
        self, record: SessionRecord, prompt: list[Any], message_id: str | None = None
    ) -> None:
        """The user's prompt, written before the agent sees it, each block a chunk of the
        message `message_id` (replayed with it, as an agent's own replay names its
        messages)."""
        named = {"messageId": message_id} if message_id is not None else {}
        for block in prompt:
            update = {"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": block, **named}
            record.writer.update(update)
        if record.meta.title is None:
            record.meta.title = title_from_prompt(prompt)
        self._write(record.meta.id, "events", record.writer.flush)

    def agent_update(self, record: SessionRecord, raw: bytes) -> None:
        """A session/update of the agent's, as its bytes (written at the batch's end)."""
        record.writer.agent_message(raw)
        self._dirty[record.id] = record.writer

    def permission(self, record: SessionRecord, params: JsonObject) -> None:
        """The agent asked the editor for permission: what for, and the choices."""
        tool = params.get("toolCall")
        tool = tool if isinstance(tool, dict) else {}
        options = [
            {key: option.get(key) for key in ("optionId", "name", "kind")}
            for option in params.get("options") or []
            if isinstance(option, dict)
        ]
        tool_call = {k: tool[k] for k in ("toolCallId", "title", "kind") if k in tool}
        record.writer.event("permission", options=options, toolCall=tool_call)
        self._dirty[record.id] = record.writer

    def permission_outcome(
        self, record: SessionRecord, response: JsonObject, by: JsonObject | None
    ) -> None:
        """How the editor answered it (or that it was cancelled), and which client did
        (`by`: its label, Client.label; None: acpctl settled it, at a cancel)."""
        result = response.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict):
            outcome = {"outcome": "error"}
        who = {"resolvedBy": by} if by is not None else {}
        record.writer.event("permission_outcome", outcome=outcome, **who, **_why(response))
        self._dirty[record.id] = record.writer

    def elicitation(self, record: SessionRecord, params: JsonObject) -> None:
        """The agent asked the person a question (elicitation/create): its message, and
        the form or the URL, as the agent sent them."""
        asked = {key: params[key] for key in ELICITATION_KEYS if key in params}
        record.writer.event("elicitation", **asked)
        self._dirty[record.id] = record.writer

    def elicitation_outcome(
        self, record: SessionRecord, response: JsonObject, by: JsonObject | None
    ) -> None:
        """How the question was answered (accept with its content, decline, cancel), and
        by which client (None: acpctl settled it, at a cancel); an error answer is
        recorded as the action "error"."""
        result = response.get("result")
        answer: JsonObject = {"action": "error"}
        if isinstance(result, dict) and isinstance(result.get("action"), str):
            answer = {key: result[key] for key in ("action", "content") if key in result}
        who = {"resolvedBy": by} if by is not None else {}
        record.writer.event("elicitation_outcome", **answer, **who, **_why(response))
        self._dirty[record.id] = record.writer

    def batch_end(self) -> None:
        for session_id, writer in self._dirty.items():
            self._write(session_id, "events", writer.flush)
        self._dirty.clear()

    def turn_end(self, record: SessionRecord, response: JsonObject) -> None:
        """The turn's end, written to the OS now; made durable by the next group commit."""
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("stopReason"), str):
            usage = result.get("usage")
            record.writer.turn_end(result["stopReason"], usage if isinstance(usage, dict) else None)
            record.meta.last_stop_reason = result["stopReason"]
        else:
            error = response.get("error")
            message = error.get("message", "no result") if isinstance(error, dict) else None
            record.writer.turn_error(str(message or "no result"))
        self._write(record.meta.id, "events", record.writer.flush)
        record.meta.turns += 1
        self._turns_due[record.id] += 1
        self.save(record)

    def save(self, record: SessionRecord) -> None:
        """The session's metadata changed: written by the next group commit."""
        record.meta.updated = utc_now()
        if isinstance(record.writer, DiscardedHistory):
            self._turns_due.pop(record.id, None)
            return
        self._due[record.id] = record
        if self._committer is None or self._committer.done():
            self._hurry.clear()
            self._committer = asyncio.create_task(self._commit_later())

    def close(self, record: SessionRecord) -> None:
        """The session leaves the connection: its events synced and closed, its metadata
        written, now."""
        self._dirty.pop(record.id, None)
        self._due.pop(record.id, None)
        self._write(record.meta.id, "events", record.writer.close)
        if not isinstance(record.writer, DiscardedHistory):
            job = self._job(record)
            self._finish(record, job, self._commit(job))

    # -- the group commit -------------------------------------------------------------------

    async def committed(self) -> None:
        """Until what was due is written: the group commit under way, if any, is done at
        once instead of after its wait (the connection is ending)."""
        if self._committer is not None:
            self._hurry.set()
            await self._committer

    async def _commit_later(self) -> None:
        # The turns that end meanwhile share the commit.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), COMMIT_DELAY_S)
        while self._due:
            due, self._due = self._due, {}
            records = list(due.values())
            jobs = [self._job(record) for record in records]
            outcomes = await asyncio.to_thread(self._commit_all, jobs)
            for record, job, outcome in zip(records, jobs, outcomes, strict=True):
                self._finish(record, job, outcome)

    def _commit_all(self, jobs: list[_Commit]) -> list[int | OSError]:
        return [self._commit(job) for job in jobs]

    def _job(self, record: SessionRecord) -> _Commit:
        """What the worker needs, taken in the event loop: a descriptor of the events that
        stays valid if the writer closes, and a copy of the metadata."""
        meta = _snapshot(record.meta)
        try:
            events = record.writer.duplicate()
        except OSError:
            events = None
        return _Commit(events, meta, self._turns_due.pop(record.id, 0))

    def _commit(self, job: _Commit) -> int | OSError:
        """In the worker: fsync the events, write the metadata; the turn count written."""
        try:
            if job.events is not None:
                os.fsync(job.events)
            return self.store.record_meta(job.meta, job.turns)
        except OSError as exc:
            return exc
        except CorruptSession as exc:
            return OSError(str(exc))
        finally:
            if job.events is not None:
                os.close(job.events)

    def _finish(self, record: SessionRecord, job: _Commit, outcome: int | OSError) -> None:
        """Back in the event loop: count what another process recorded meanwhile; after a
        failure, the turns wait for the next commit."""

        def result() -> None:
            if isinstance(outcome, OSError):
                self._turns_due[record.id] += job.turns
                raise outcome
            record.meta.turns += outcome - job.meta.turns

        self._write(record.meta.id, "metadata", result)

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


@dataclasses.dataclass
class _Commit:
    events: int | None  # a duplicate descriptor of events.jsonl, closed by the commit
    meta: SessionMeta
    turns: int  # turns counted in meta.turns that the file does not have yet


def _snapshot(meta: SessionMeta) -> SessionMeta:
    """A copy of the metadata that later changes to the session's do not reach."""
    return dataclasses.replace(meta, state=copy.deepcopy(meta.state))


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _why(response: JsonObject) -> JsonObject:
    """An error answer's message, kept beside its outcome: why no one answered."""
    error = response.get("error")
    said = error.get("message") if isinstance(error, dict) else None
    return {"error": said} if isinstance(said, str) else {}
