"""Session history on disk.

Layout, under paths.sessions_dir():

    <id>/session.json    metadata, replaced atomically (temp file + rename)
    <id>/events.jsonl    append-only: one complete JSON object a line

Event lines:

    {"ts": 1732912345.123, "type": "update", "update": {"sessionUpdate": ...}}
    {"ts": 1732912345.234, "type": "agent", "message": {"jsonrpc": "2.0",
        "method": "session/update", "params": {"sessionId": "<agent's id>", "update": {}}}}
    {"ts": 1732912345.456, "type": "turn_end", "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}}   (usage: when
        the prompt's response had one)
    {"ts": 1732912345.456, "type": "turn_error", "message": "..."}
    {"ts": 1732912345.5, "type": "permission", "toolCall": {"title": ...}, "options": [...]}
    {"ts": 1732912345.6, "type": "permission_outcome", "outcome": {"outcome": "selected",
        "optionId": "allow"}}   (what the agent asked the editor, and the answer)
    {"ts": 1732912345.567, "type": "fork", "parentId": "..."}   (a fork: the lines before
        it are a copy of the parent's history)

User prompts are stored as `user_message_chunk` updates (type "update"); what the agent
sent is stored verbatim (type "agent": the notification's own bytes, embedded without
re-encoding, which keeps recording cheap on the relay's hot path). A replay is the updates
of both, in order; `event_update()` reads either shape.

Appends are buffered in memory and written with one os.write() on an O_APPEND descriptor,
so a line is never split between two writes (and two processes appending to one session
interleave whole lines). Durability: buffers are written to the OS after every batch of
agent output and before a turn's response reaches the editor (a crash or kill of acpctl
loses nothing); the recorder fsyncs events.jsonl and rewrites session.json in the background
shortly after (see runner/recorder.py) and when a session is closed. A crash of the machine
can leave a torn last line; readers skip it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from acpctl import paths
from acpctl.files import atomic_write
from acpctl.store.lines import (
    READ_CHUNK_BYTES,
    CorruptSession,
    StoredAt,
    StoredUpdate,
    agent_raw,
    event_update,
    open_private,
    opened_at,
    refuse_linked_dir,
    whole_lines,
)
from acpctl.store.writer import HistoryWriter

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per session is assumed there
    fcntl = None  # type: ignore[assignment]

SESSION_FILE = "session.json"
EVENTS_FILE = "events.jsonl"
# The event types that end a turn (HistoryWriter.turn_end and turn_error).
TURN_ENDS = ("turn_end", "turn_error")
# Grows by a byte at every metadata write and deletion: the listing index rescans the
# store only when its size (or the store directory's own mtime) has changed.
CHANGES_FILE = ".changes"
STORE_VERSION = 1
MAX_ID_LENGTH = 128
TITLE_LENGTH = 120
# fullmatch: `$` alone would let a trailing newline through ("abc\n")
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class InvalidSessionId(ValueError):
    """A session id that cannot name a directory."""

    def __init__(self, session_id: object) -> None:
        super().__init__(f"invalid session id {session_id!r}")


def checked_session_id(session_id: object) -> str:
    """`session_id` when it may name a directory (valid_session_id); else raises
    InvalidSessionId."""
    if not valid_session_id(session_id):
        raise InvalidSessionId(session_id)
    assert isinstance(session_id, str)
    return session_id


def valid_session_id(session_id: object) -> bool:
    """Whether a session id from the wire may name a directory: no separators, no '..',
    no leading dot, bounded length."""
    return (
        isinstance(session_id, str)
        and 0 < len(session_id) <= MAX_ID_LENGTH
        and _ID_RE.fullmatch(session_id) is not None
        and ".." not in session_id
    )


def utc_stamp(moment: float | None = None) -> str:
    """A moment (now by default) as the store writes it: ISO 8601 in UTC, to the
    millisecond, with a Z."""
    when = (
        datetime.now(timezone.utc)
        if moment is None
        else datetime.fromtimestamp(moment, timezone.utc)
    )
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_now() -> str:
    return utc_stamp()


def title_from_prompt(prompt: list[Any]) -> str | None:
    for block in prompt:
        if isinstance(block, dict) and block.get("type") == "text":
            title = title_from_text(str(block.get("text", "")))
            if title:
                return title
    return None


def title_from_text(text: str) -> str | None:
    """A session's title from text: its first line that is not blank, cut short."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:TITLE_LENGTH]
    return None


@dataclass
class SessionMeta:
    id: str
    agent: str
    command: list[str]
    cwd: str
    additional_directories: list[str] = field(default_factory=list)
    title: str | None = None
    created: str = field(default_factory=utc_now)
    updated: str = field(default_factory=utc_now)
    agent_session_id: str | None = None
    turns: int = 0
    last_stop_reason: str | None = None
    parent_id: str | None = None  # the session this one was forked from
    subagent_of: str | None = None  # the session whose agent ran this one as its subagent
    name: str | None = None  # the user's name for it (`run --name`, `sessions rename`)
    # What the user chose for the session (keys "mode", "model", "config": {id: value}),
    # re-applied when a fresh agent session has to stand in for a lost one.
    state: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": STORE_VERSION, **{f.key: getattr(self, f.attr) for f in META_FIELDS}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionMeta:
        """Raises ValueError naming the first field of the wrong type."""
        return cls(**{f.attr: f.read(data.get(f.key)) for f in META_FIELDS})


class MetaField:
    """One field of a session's metadata: its attribute, its key in session.json, its
    column in the listing index, and what values it takes (`kind`)."""

    def __init__(self, attr: str, key: str, kind: str, column: str) -> None:
        self.attr = attr
        self.key = key
        self.kind = kind
        self.column = column

    def read(self, value: Any) -> Any:
        """`value` as session.json holds it, checked (ValueError names the field)."""
        if self.kind in (TEXT, OPTIONAL_TEXT):
            if value is None:
                return "" if self.kind == TEXT else None
            if not isinstance(value, str):
                raise ValueError(f"{self.key} must be a string")
            return value
        if self.kind == STRINGS:
            value = value or []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{self.key} must be a list of strings")
            return value
        if self.kind == COUNT:
            value = 0 if value is None else value
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{self.key} must be a whole number")
            return value
        value = value or {}
        if not isinstance(value, dict):
            raise ValueError(f"{self.key} must be an object")
        return value

    def to_column(self, value: Any) -> Any:
        """The value as an SQL column holds it: lists and objects as JSON text."""
        return json.dumps(value) if self.kind in (STRINGS, OBJECT) else value

    def from_column(self, value: Any) -> Any:
        if self.kind == STRINGS:
            return [] if value == "[]" else json.loads(value)  # most rows: nothing to decode
        if self.kind == OBJECT:
            return {} if value == "{}" else json.loads(value)
        return value


# What a field holds: a string ("" when absent), a string or None, a list of strings, a
# whole number, a JSON object.
TEXT, OPTIONAL_TEXT, STRINGS, COUNT, OBJECT = "text", "optional", "strings", "count", "object"
# The metadata, in one table: session.json, SessionMeta and the index all follow it, so a
# new field is one line here.
META_FIELDS = (
    MetaField("id", "id", TEXT, "id"),
    MetaField("agent", "agent", TEXT, "agent"),
    MetaField("command", "command", STRINGS, "command"),
    MetaField("cwd", "cwd", TEXT, "cwd"),
    MetaField("additional_directories", "additionalDirectories", STRINGS, "directories"),
    MetaField("title", "title", OPTIONAL_TEXT, "title"),
    MetaField("created", "created", TEXT, "created"),
    MetaField("updated", "updated", TEXT, "updated"),
    MetaField("agent_session_id", "agentSessionId", OPTIONAL_TEXT, "agent_session_id"),
    MetaField("turns", "turns", COUNT, "turns"),
    MetaField("last_stop_reason", "lastStopReason", OPTIONAL_TEXT, "last_stop"),
    MetaField("parent_id", "parentId", OPTIONAL_TEXT, "parent"),
    MetaField("subagent_of", "subagentOf", OPTIONAL_TEXT, "subagent_of"),
    MetaField("name", "name", OPTIONAL_TEXT, "name"),
    MetaField("state", "state", OBJECT, "state"),
)


class SessionStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.sessions_dir()

    def identity(self) -> str:
        """What tells this store from another, on this machine or elsewhere: the machine's
        name and the root's device and inode (a link to this machine's own host records
        nothing twice, runner/remote_history.py)."""
        import socket
        import zlib

        paths.ensure_private_dir(self.root)
        info = os.stat(self.root)
        mark = f"{socket.gethostname()}:{info.st_dev}:{info.st_ino}"
        return f"{zlib.crc32(mark.encode()):08x}"

    def session_dir(self, session_id: str) -> Path:
        """The session's directory; CorruptSession when it is a symbolic link, which
        acpctl never follows (it would put a conversation, and its appends, elsewhere)."""
        directory = self.root / checked_session_id(session_id)
        refuse_linked_dir(directory)
        return directory

    def backend_dir(self, session_id: str, backend: str, create: bool) -> Path:
        """A private directory in the session's own for a backend's files (pi keeps its
        session files there). Raises FileNotFoundError when it is missing and not created,
        ValueError for an id that cannot name a session."""
        directory = self.session_dir(session_id) / backend
        if create:
            paths.ensure_private_dir(directory)
        elif not directory.is_dir():
            raise FileNotFoundError(directory)
        return directory

    def discard_backend_dir(self, session_id: str, backend: str) -> None:
        """Remove what a backend left for a session that never started, and the session's
        directory with it when nothing else is there."""
        directory = self.session_dir(session_id)
        shutil.rmtree(directory / backend, ignore_errors=True)
        with contextlib.suppress(OSError):
            directory.rmdir()

    def exists(self, session_id: str) -> bool:
        return valid_session_id(session_id) and (self.root / session_id / SESSION_FILE).is_file()

    def create(self, meta: SessionMeta) -> HistoryWriter:
        paths.ensure_private_dir(self.root)
        directory = self.session_dir(meta.id)
        directory.mkdir(mode=paths.PRIVATE_DIR_MODE, exist_ok=True)
        self.write_meta(meta)
        return HistoryWriter(directory / EVENTS_FILE)

    def fork(self, parent_id: str, meta: SessionMeta) -> HistoryWriter:
        """A new session whose history starts as a copy of `parent_id`'s so far."""
        writer = self.create(meta)
        source = open_private(self.session_dir(parent_id) / EVENTS_FILE, os.O_RDONLY)
        last = b"\n"
        try:
            while chunk := os.read(source, 1 << 20):
                writer.write_through(chunk)
                last = chunk[-1:]
        finally:
            os.close(source)
        if last != b"\n":  # the parent's torn last line stays a fragment readers skip
            writer.write_through(b"\n")
        # Where the copy ends: what came before is the parent's (usage is not counted twice)
        writer.event("fork", parentId=parent_id)
        writer.flush()
        return writer

    def open_writer(self, session_id: str) -> HistoryWriter:
        return HistoryWriter(self.session_dir(session_id) / EVENTS_FILE)

    def write_meta(self, meta: SessionMeta) -> None:
        data = json.dumps(meta.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
        atomic_write(self.session_dir(meta.id) / SESSION_FILE, data)
        self._changed()

    def _changed(self) -> None:
        fd = open_private(self.root / CHANGES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)

    def change_mark(self) -> tuple[int, int]:
        """What tells the index whether to rescan: the store directory's mtime (sessions
        added or removed) and the size of the changes file (metadata rewritten)."""
        try:
            root = os.stat(self.root).st_mtime_ns
        except FileNotFoundError:
            return (0, 0)
        try:
            changes = os.stat(self.root / CHANGES_FILE).st_size
        except FileNotFoundError:
            changes = 0
        return (root, changes)

    def record_meta(self, meta: SessionMeta, turns_added: int) -> int:
        """Write a live session's metadata when another process may write it too (an editor
        and `acpctl run --continue` on one session): under a lock on the session, the turn
        count is the larger of the two before this process's `turns_added` (already counted
        in `meta.turns`), plus those; the name is the one on disk (`sessions rename` may
        have set it meanwhile); the rest is this process's. Returns the count written."""
        with self._locked(meta.id):
            with contextlib.suppress(CorruptSession):
                on_disk = self.read_meta(meta.id)
                meta.turns = max(meta.turns - turns_added, on_disk.turns) + turns_added
                meta.name = on_disk.name
            self.write_meta(meta)
        return meta.turns

    def rename(self, session_id: str, name: str | None) -> None:
        """Name a session (None: no name), under the lock a live run writes it under."""
        with self._locked(session_id):
            meta = self.read_meta(session_id)
            meta.name = name
            self.write_meta(meta)

    def retitle(self, session_id: str, title: str) -> None:
        """A session not open here given the title its agent took (session/set_title),
        under the same lock."""
        with self._locked(session_id):
            meta = self.read_meta(session_id)
            meta.title = title
            self.write_meta(meta)

    @contextlib.contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        fd = open_private(self.session_dir(session_id) / EVENTS_FILE, os.O_RDONLY | os.O_CREAT)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # and with it the lock

    def read_meta(self, session_id: str) -> SessionMeta:
        checked_session_id(session_id)
        # A string path: the index reads 10,000 of these at once, and pathlib's joins
        # would cost more than the reads.
        path = os.path.join(self.root, session_id, SESSION_FILE)
        refuse_linked_dir(os.path.join(self.root, session_id))
        try:
            fd = open_private(path, os.O_RDONLY)
            try:
                chunks = []
                while chunk := os.read(fd, 1 << 16):  # bytes, not a text wrapper: the
                    chunks.append(chunk)  # index reads 10,000 of these at once
            finally:
                os.close(fd)
            return SessionMeta.from_json(json.loads(b"".join(chunks)))
        except FileNotFoundError as exc:
            raise CorruptSession(f"{path}: missing") from exc
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise CorruptSession(f"{path}: {exc}") from exc

    def iter_replay(self, session_id: str) -> Iterator[StoredUpdate]:
        """What a session/load replays, in order: each stored update, with what it takes to
        send the agent's own line for it (StoredUpdate.raw)."""
        for update, event, line in self.replay_items(session_id):
            assert update is not None  # no other events were asked for
            yield StoredUpdate(update, event, line, session_id)

    def replay_items(
        self, session_id: str, events: frozenset[str] = frozenset()
    ) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any], bytes]]:
        """As iter_replay, each as (update, event, line): for a replay that makes a
        StoredUpdate of few of them (one that joins a message's fragments). `events`:
        the other event types to yield too, in their place, with None as the update."""
        for event, line in self._iter_lines(session_id):
            update = event_update(event)
            if update is not None or event.get("type") in events:
                yield update, event, line

    def agent_lines(self, at: StoredAt, count: int) -> Iterator[bytes]:
        """The agent's notifications recorded from `at` on, at most `count`, each as the
        line it arrived as (without its newline). Told by the writer's shape alone, as the
        writer counted them; nothing is decoded: a caller checks what it gets. Fewer when
        the file holds fewer (not written yet, cut or gone)."""
        session_id, offset, nth = at
        handle = opened_at(self.session_dir(session_id) / EVENTS_FILE, offset)
        if handle is None:
            return
        index = 0
        with handle:
            while count > 0 and (lines := handle.readlines(READ_CHUNK_BYTES)):
                for line in lines:
                    if not line.endswith(b"\n"):  # still being written, or torn
                        return
                    raw = agent_raw(line)
                    if raw is None:
                        continue
                    if index >= nth:
                        yield raw
                        count -= 1
                        if count <= 0:
                            return
                    index += 1

    def iter_events(self, session_id: str) -> Iterator[dict[str, Any]]:
        """Stored events in order. Torn or corrupt lines are skipped, never fatal."""
        for event, _ in self._iter_lines(session_id):
            yield event

    def _iter_lines(self, session_id: str) -> Iterator[tuple[dict[str, Any], bytes]]:
        """(event, its line) in order, from the start (see whole_lines)."""
        path = self.session_dir(session_id) / EVENTS_FILE
        try:
            handle = os.fdopen(open_private(path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            return
        with handle:
            for event, line, _ in whole_lines(handle, 0):
                yield event, line

    def delete(self, session_id: str) -> bool:
        directory = self.root / checked_session_id(session_id)
        if directory.is_symlink():  # the link goes, never what it points to
            directory.unlink()
            self._changed()
            return True
        if not directory.is_dir():
            return False
        shutil.rmtree(directory)
        self._changed()
        return True
