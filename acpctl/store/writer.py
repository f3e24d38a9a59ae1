"""Appending to a session's events.jsonl: buffered, written whole with one os.write() on an
O_APPEND descriptor, flushed and synced when the recorder says (store/sessions.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acpctl.store.lines import AGENT_HEAD, AGENT_MIDDLE, StoredAt, open_private


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
            self._head = b"%s%.3f%s" % (AGENT_HEAD, now, AGENT_MIDDLE)
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
