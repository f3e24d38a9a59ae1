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
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from acpctl import paths
from acpctl.errors import AcpctlError
from acpctl.files import atomic_write
from acpctl.jsontext import decode_text

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


def event_update(event: dict[str, Any]) -> dict[str, Any] | None:
    """The session/update payload of a stored event, or None for other events."""
    kind = event.get("type")
    if kind == "update":
        update = event.get("update")
    elif kind == "agent":
        message = event.get("message")
        params = message.get("params") if isinstance(message, dict) else None
        update = params.get("update") if isinstance(params, dict) else None
    else:
        return None
    return update if isinstance(update, dict) else None


# An "agent" event line as HistoryWriter.agent_message writes it, around the message:
# `{"ts":N,"type":"agent","message":` M `}` and a newline.
_AGENT_HEAD = b'{"ts":'
_AGENT_MIDDLE = b',"type":"agent","message":'
_AGENT_TAIL = b"}\n"
_TS_MAX = 32  # bytes a timestamp can take
_MIDDLE_FROM = len(_AGENT_HEAD)
_MIDDLE_TO = _MIDDLE_FROM + _TS_MAX + len(_AGENT_MIDDLE)


def _agent_raw(line: bytes) -> bytes | None:
    """The notification inside a line in the writer's "agent" shape, `{"ts":N,"type":
    "agent","message":M}`, as M's bytes: everything between the middle and the closing
    brace (a number holds no such text); None for a line of another shape. Not decoded."""
    if not (line.startswith(_AGENT_HEAD) and line.endswith(_AGENT_TAIL)):
        return None
    middle = line.find(_AGENT_MIDDLE, _MIDDLE_FROM, _MIDDLE_TO)
    if middle < 0:
        return None
    return line[middle + len(_AGENT_MIDDLE) : -len(_AGENT_TAIL)]


def agent_message_line(event: dict[str, Any], line: bytes) -> bytes | None:
    """The agent's notification inside an "agent" event, as the line it arrived as: when
    the line (already parsed whole as `event`, exactly these three keys) has the writer's
    shape `{"ts":N,"type":"agent","message":M}`, everything between the middle and the
    closing brace is M's JSON value (a number holds no such text). Called for every line a
    session/load replays: the cheapest tests come first."""
    if (
        event.get("type") != "agent"
        or len(event) != 3
        or not isinstance(event.get("message"), dict)
        or (raw := _agent_raw(line)) is None
    ):
        return None
    return raw + b"\n"


# Where an agent's notification is in a session's history: (the session's id, a byte
# offset of its events file, n): the nth "agent" event (from 0) after that offset
# (HistoryWriter.last_agent_line). A plain tuple: one is made for every relayed line.
StoredAt = tuple[str, int, int]


class StoredUpdate(NamedTuple):
    """One stored session/update payload, and the event line it came in."""

    update: dict[str, Any]
    event: dict[str, Any]
    line: bytes
    session_id: str

    def raw(self) -> bytes | None:
        """The agent's notification as its own line, when it can be sent on as it is (for
        this session, stored in the writer's shape); None: to wrap (the user's prompts;
        notifications stored in another shape or under another session id of the
        agent's). Found only when asked: a replay that joins fragments needs few."""
        message = agent_message_line(self.event, self.line)
        if message is None:
            return None
        params = self.event["message"].get("params")
        if isinstance(params, dict) and params.get("sessionId") == self.session_id:
            return message
        return None


READ_CHUNK_BYTES = 1 << 20
_UNREADABLE = object()


def events_from(path: Path, offset: int) -> Iterator[tuple[dict[str, Any], int]]:
    """The events of an events.jsonl from byte `offset` on, each with where its line ends:
    whole lines only (one still being written is left for the next reader), torn or
    corrupt ones skipped. For readers that follow a file as it grows."""
    handle = _opened_at(path, offset)
    if handle is None:
        return
    with handle:
        for event, _, end in _whole_lines(handle, offset):
            yield event, end


def _opened_at(path: Path, offset: int) -> BinaryIO | None:
    """The events file at `path`, read from byte `offset`; None when it cannot be read
    (gone, a link, not a regular file): a reader that follows a file takes that as no more
    lines yet."""
    try:
        handle = os.fdopen(open_private(path, os.O_RDONLY), "rb")
    except (OSError, CorruptSession):
        return None
    handle.seek(offset)
    return handle


def _whole_lines(handle: BinaryIO, offset: int) -> Iterator[tuple[dict[str, Any], bytes, int]]:
    """(event, its line, where the line ends) from the handle's position, `offset`. Lines
    are read a chunk at a time and each parsed as it is taken (a chunk's thousands of
    values made at once would be traversed again and again by the garbage collector); a
    line without its newline is one still being written, or the torn end a crashed writer
    left: reading stops before it."""
    while lines := handle.readlines(READ_CHUNK_BYTES):
        torn = not lines[-1].endswith(b"\n")
        if torn:
            lines.pop()
        for event, line in zip(map(_parse_one, lines), lines, strict=True):
            offset += len(line)
            if isinstance(event, dict):
                yield event, line, offset
        if torn:
            return


def _parse_one(line: bytes) -> Any:
    """The line's JSON value, _UNREADABLE for a line that is not exactly one."""
    try:
        return decode_text(line)
    except (ValueError, RecursionError):
        return _UNREADABLE


class CorruptSession(AcpctlError):
    """session.json is missing or unreadable, or a file of the session is a symlink."""


def refuse_linked_dir(directory: Path | str) -> None:
    if os.path.islink(directory):
        raise CorruptSession(f"{directory} is a symbolic link; acpctl does not follow it")


def open_private(path: Path | str, flags: int) -> int:
    """Open a file of the store without following a symlink: a link planted in the store
    must not redirect a conversation to a file elsewhere; and only a regular file (a FIFO
    would block the reader, and with it every session of a host, for good). CorruptSession
    says which."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK, paths.PRIVATE_FILE_MODE)
    except OSError as exc:
        if os.path.islink(path):
            raise CorruptSession(f"{path} is a symbolic link; acpctl does not follow it") from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CorruptSession(f"{path} is not a regular file; acpctl does not read it")
    os.set_blocking(fd, True)
    return fd


class HistoryWriter:
    """Appends events to one session's events.jsonl (see the module docstring)."""

    def __init__(self, path: Path, fd: int | None = None) -> None:
        """`fd`: -1 for a writer with no file (yet), else the file at `path` is opened."""
        self.path = path
        self._fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT) if fd is None else fd
        self._buffer: list[bytes] = []
        self._stamped = 0.0
        self._head = b""
        self._end = -1  # where the file ended after this writer's last write (-1: unknown)
        # Where the file ended when this writer took its first agent line (-1: none taken
        # yet, -2: it had no file then), and how many it has taken since: together they say
        # where each one is in the file (last_agent_line).
        self._agent_from = -1
        self._agent_lines = 0

    def append(self, event: dict[str, Any]) -> None:
        self._buffer.append(
            json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        )

    def event(self, kind: str, **fields: Any) -> None:
        """An event of this `type`, stamped now (the module docstring lists the kinds)."""
        self.append({"ts": round(time.time(), 3), "type": kind, **fields})

    def update(self, update: Any) -> None:
        self.event("update", update=update)

    def agent_message(self, raw: bytes) -> None:
        """A session/update notification as the agent sent it (one valid JSON line). The
        hot path of recording: the line's head is formatted once a millisecond (the
        timestamps' resolution), not once a message."""
        now = time.time()
        if now - self._stamped >= 0.001:
            self._stamped = now
            self._head = b"%s%.3f%s" % (_AGENT_HEAD, now, _AGENT_MIDDLE)
        if raw.endswith((b"\n", b"\r")):
            raw = raw.rstrip(b"\r\n")
        self._buffer += (self._head, raw, b"}\n")
        if not self._agent_lines:
            self._agent_from = os.fstat(self._fd).st_size if self._fd >= 0 else -2
        self._agent_lines += 1

    def last_agent_line(self, session_id: str) -> StoredAt | None:
        """Where the agent line taken last goes in the file (of the session `session_id`);
        None when that cannot be said (no file)."""
        if self._agent_from < 0:
            return None
        return (session_id, self._agent_from, self._agent_lines - 1)

    def turn_end(self, stop_reason: str, usage: dict[str, Any] | None = None) -> None:
        self.event("turn_end", stopReason=stop_reason, **({"usage": usage} if usage else {}))

    def turn_error(self, message: str) -> None:
        self.event("turn_error", message=message)

    def flush(self) -> None:
        """Write what is buffered. On a failed write (a full disk) the part of it that
        reached the file is cut off again, so no partial line stays, and everything is kept
        for the next flush; the OSError is raised."""
        if not self._buffer or self._fd < 0:
            return
        data = self._line_start() + b"".join(self._buffer)
        self._buffer.clear()
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, memoryview(data)[written:])
        except OSError:
            self._buffer.append(data.removeprefix(b"\n"))
            if written:
                os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            self._end = -1
            raise
        self._end += written

    def _line_start(self) -> bytes:
        """A newline to write first when the file does not end a line: another writer (or
        a crash) left a torn last line, and the next event must not be glued to it (the
        reader then skips only the fragment). One fstat a flush; the last byte is read
        only when someone else wrote since this writer did."""
        size = os.fstat(self._fd).st_size
        if size == self._end:
            return b""
        self._end = size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            return b"\n"
        return b""

    def write_through(self, data: bytes) -> None:
        """Append bytes that already are whole event lines (a fork's copied history)."""
        self._buffer.append(data)
        self.flush()

    def sync(self) -> None:
        self.flush()
        if self._fd >= 0:
            os.fsync(self._fd)

    def duplicate(self) -> int | None:
        """A descriptor of the file another thread can fsync and close, whatever happens
        to this writer meanwhile; None once it is closed."""
        return os.dup(self._fd) if self._fd >= 0 else None

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1


class DeferredHistory(HistoryWriter):
    """The writer of a session whose files could not be created yet (a full disk): it
    buffers events as any writer does, and each flush tries to create the files again.
    Once that works it adopts the new file, and the session is recorded from its start."""

    def __init__(self, create: Callable[[], HistoryWriter]) -> None:
        super().__init__(Path(os.devnull), fd=-1)
        self._create: Callable[[], HistoryWriter] | None = create

    def flush(self) -> None:
        if self._create is not None:
            if not self._buffer:
                return
            created = self._create()  # raises OSError while it still cannot
            self._create = None
            self.path, self._fd, created._fd = created.path, created._fd, -1
        super().flush()

    def close(self) -> None:
        if self._create is not None:
            self.flush()  # the last chance; an OSError says what is lost
        super().close()


class DiscardedHistory(HistoryWriter):
    """The writer of a session that is not recorded (`acpctl run --acp --no-history`)."""

    def __init__(self) -> None:
        super().__init__(Path(os.devnull), fd=-1)

    def append(self, event: dict[str, Any]) -> None:
        pass

    def agent_message(self, raw: bytes) -> None:
        pass


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
        handle = _opened_at(self.session_dir(session_id) / EVENTS_FILE, offset)
        if handle is None:
            return
        index = 0
        with handle:
            while count > 0 and (lines := handle.readlines(READ_CHUNK_BYTES)):
                for line in lines:
                    if not line.endswith(b"\n"):  # still being written, or torn
                        return
                    raw = _agent_raw(line)
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
        """(event, its line) in order, from the start (see _whole_lines)."""
        path = self.session_dir(session_id) / EVENTS_FILE
        try:
            handle = os.fdopen(open_private(path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            return
        with handle:
            for event, line, _ in _whole_lines(handle, 0):
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
