"""The lines of a session's events.jsonl (store/sessions.py says their shapes): an update read
from either shape, the agent's own line found without decoding it, whole lines read from
an offset (a torn last line skipped), and a store file opened without following a link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from acpctl import paths
from acpctl.errors import AcpctlError
from acpctl.jsontext import decode_text


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
AGENT_HEAD = b'{"ts":'
AGENT_MIDDLE = b',"type":"agent","message":'
_AGENT_TAIL = b"}\n"
_TS_MAX = 32  # bytes a timestamp can take
_MIDDLE_FROM = len(AGENT_HEAD)
_MIDDLE_TO = _MIDDLE_FROM + _TS_MAX + len(AGENT_MIDDLE)


def agent_raw(line: bytes) -> bytes | None:
    """The notification inside a line in the writer's "agent" shape, `{"ts":N,"type":
    "agent","message":M}`, as M's bytes: everything between the middle and the closing
    brace (a number holds no such text); None for a line of another shape. Not decoded."""
    if not (line.startswith(AGENT_HEAD) and line.endswith(_AGENT_TAIL)):
        return None
    middle = line.find(AGENT_MIDDLE, _MIDDLE_FROM, _MIDDLE_TO)
    if middle < 0:
        return None
    return line[middle + len(AGENT_MIDDLE) : -len(_AGENT_TAIL)]


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
        or (raw := agent_raw(line)) is None
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
    handle = opened_at(path, offset)
    if handle is None:
        return
    with handle:
        for event, _, end in whole_lines(handle, offset):
            yield event, end


def opened_at(path: Path, offset: int) -> BinaryIO | None:
    """The events file at `path`, read from byte `offset`; None when it cannot be read
    (gone, a link, not a regular file): a reader that follows a file takes that as no more
    lines yet."""
    try:
        handle = os.fdopen(open_private(path, os.O_RDONLY), "rb")
    except (OSError, CorruptSession):
        return None
    handle.seek(offset)
    return handle


def whole_lines(handle: BinaryIO, offset: int) -> Iterator[tuple[dict[str, Any], bytes, int]]:
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
