"""The cursors on what a logical connection sends (the resumable-delivery draft), and what
it keeps of what it sent, so that a client can resume after any cursor it was given for as
long as the connection lives: as long as the history holds, not as long as a ring.

A message the history holds just as it was sent (an agent's session/update, relayed as its
own bytes) is kept as text until RECENT_TEXTS newer ones have been; from then on only as
its place in the store, and consecutive ones as one run: a few numbers however long the
turn. Everything else is kept as text. What is read back from the store must be what was
sent, to the character (the dropped texts' hashes, folded, say so); else the resume is
refused, as the draft has it, never served wrong. The log holds at most RETENTION_ENTRIES
entries (runs and texts); past that the oldest go, and what they held cannot be resumed."""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

from acpctl import cursors_wire
from acpctl.jsontext import decode_text
from acpctl.store.lines import StoredAt
from acpctl.store.sessions import SessionStore

ALL_STREAMS = None  # what a WebSocket reads: every stream of the connection
RECENT_TEXTS = 8192  # a few of the agent's reads: written to the store by then
RETENTION_ENTRIES = 100_000
DROP_AT_ONCE = 256  # texts dropped a batch at a time: one call a text cost more than the drop
SIZE_BLOCK = 1024  # dropped texts whose sizes are summed together (_Run.dropped_sizes)
# The dropped texts' check: each one's str hash, folded. The hash is the one this process
# computes for an equal text, and it is this process that sent them and reads them back.
_FOLD_BY = 1_000_003
_FOLD_MASK = (1 << 64) - 1


class ResumeRefused(Exception):
    """The cursor is not one this connection can resume from (unknown, or no longer held)."""


@dataclass(eq=False)
class _Run:
    """Messages sent one after the other on one stream that the history holds one after
    the other as they were sent."""

    first: int  # the first's cursor; the others follow it one by one
    stream: str
    session_id: str
    offset: int  # where in the events file the history's count starts
    nth: int  # the first's place in that count
    textual: bool  # whether their cursors went into their lines' text (cursors_wire.line_with)
    count: int = 0
    texts: collections.deque[str] = field(default_factory=collections.deque)  # the newest
    dropped: int = 0  # how many of the first have only their place kept
    # Their texts' characters, a block of SIZE_BLOCK texts each: what a resume would give
    # back is known close enough, before anything is read, to refuse one too big.
    dropped_sizes: list[int] = field(default_factory=list)
    check: int = 0  # the dropped texts' hashes, folded

    @property
    def last(self) -> int:
        return self.first + self.count - 1


_Sent = tuple[int, str, str]  # (cursor, stream, text)


class SentLog:
    def __init__(self, store: SessionStore | None) -> None:
        self._store = store  # None: everything is kept as text
        self._entries: collections.deque[_Run | _Sent] = collections.deque()
        self._keeping: collections.deque[_Run] = collections.deque()  # with texts, oldest first
        self._kept = 0  # the texts runs keep

    @property
    def reads_back(self) -> bool:
        return self._store is not None

    def add(
        self, cursor: int, stream: str, text: str, at: StoredAt | None, textual: bool = False
    ) -> None:
        """The message sent with `cursor`; `at`: where the history holds it as sent;
        `textual`: its text is that line's with the cursor put in (cursors_wire.line_with)."""
        if at is None or self._store is None:
            self._entries.append((cursor, stream, text))
            if len(self._entries) > RETENTION_ENTRIES:
                self._forget_oldest()
            return
        run = self._entries[-1] if self._entries else None
        session_id, offset, nth = at
        if not (
            isinstance(run, _Run)
            and cursor == run.first + run.count
            and nth == run.nth + run.count
            and offset == run.offset
            and session_id == run.session_id
            and stream == run.stream
            and textual == run.textual
        ):
            run = _Run(cursor, stream, session_id, offset, nth, textual)
            self._entries.append(run)
            if len(self._entries) > RETENTION_ENTRIES:
                self._forget_oldest()
        run.count += 1
        run.texts.append(text)
        if len(run.texts) == 1:
            self._keeping.append(run)
        self._kept += 1
        if self._kept > RECENT_TEXTS + DROP_AT_ONCE:
            self._drop_oldest_texts()

    def oldest(self, next_cursor: int) -> int:
        """The first cursor held (`next_cursor` when nothing is)."""
        if not self._entries:
            return next_cursor
        entry = self._entries[0]
        return entry.first if isinstance(entry, _Run) else entry[0]

    def issued(self, cursor: int, stream: str | None) -> bool:
        """Whether `cursor` was sent on `stream` and is held."""
        for entry in self._entries:
            if isinstance(entry, _Run):
                if entry.first <= cursor <= entry.last and _on(entry.stream, stream):
                    return True
            elif entry[0] == cursor and _on(entry[1], stream):
                return True
        return False

    def after(self, start: int, stream: str | None, most: int) -> list[tuple[int, str]]:
        """What was sent on `stream` after the cursor `start`, in order. ResumeRefused when
        the history no longer gives back what was sent, or when it is more than `most`
        characters: more than one transport may fall behind, so that it would be cut off
        again at once."""
        found: list[tuple[int, str]] = []
        size = 0
        for entry in self._since(start):
            if isinstance(entry, _Run):
                if entry.last > start and _on(entry.stream, stream):
                    members = self._members(entry, start, most, size)
                    found += members
                    size += sum(len(text) for _, text in members)
            elif entry[0] > start and _on(entry[1], stream):
                found.append((entry[0], entry[2]))
                size += len(entry[2])
            if size > most:
                raise _too_much(start, most)
        return found

    def _since(self, start: int) -> list[_Run | _Sent]:
        """The entries that hold a cursor after `start`, oldest first: found from the
        newest back, so that a reader attaching now (what no reader had: often nothing)
        does not walk the whole log."""
        newer: list[_Run | _Sent] = []
        for entry in reversed(self._entries):
            if (entry.last if isinstance(entry, _Run) else entry[0]) <= start:
                break
            newer.append(entry)
        newer.reverse()
        return newer

    def _members(self, run: _Run, start: int, most: int, size: int) -> list[tuple[int, str]]:
        skip = max(0, start - run.first + 1)  # those at or before the cursor
        texts: list[str] = []
        # The blocks wholly after the cursor, at least, would be given back.
        after = run.dropped_sizes[-(-skip // SIZE_BLOCK) :] if skip < run.dropped else []
        if size + sum(after) > most:
            raise _too_much(start, most)
        if skip < run.dropped:
            texts = self._read_back(run)[skip:]
        kept = itertools.islice(run.texts, max(0, skip - run.dropped), None)
        return list(enumerate([*texts, *kept], run.first + skip))

    def _read_back(self, run: _Run) -> list[str]:
        """The texts of the run's dropped members, from the history, made as they were
        when sent: the cursor put into the line's text, or the line decoded and encoded
        with it (run.textual)."""
        assert self._store is not None
        lines = self._store.agent_lines((run.session_id, run.offset, run.nth), run.dropped)
        texts: list[str] = []
        check = 0
        try:
            for cursor, line in enumerate(lines, run.first):
                if run.textual:
                    put = cursors_wire.put_in(line, str(cursor))
                    if put is None:  # not the line that was sent
                        break
                    text = put
                else:
                    text = cursors_wire.encoded_with(decode_text(line), str(cursor))
                texts.append(text)
                check = (check * _FOLD_BY + hash(text)) & _FOLD_MASK
        except (ValueError, RecursionError):  # not JSON (any more): not what was sent
            check = ~run.check
        if len(texts) != run.dropped or check != run.check:
            raise ResumeRefused(
                f"the history of session {run.session_id} no longer holds what this "
                f"connection was sent after cursor {run.first - 1}"
            )
        return texts

    def _drop_oldest_texts(self) -> None:
        while self._kept > RECENT_TEXTS:
            run = self._keeping[0]
            texts, check = run.texts, run.check
            for _ in range(min(len(texts), self._kept - RECENT_TEXTS)):
                text = texts.popleft()
                check = (check * _FOLD_BY + hash(text)) & _FOLD_MASK
                if run.dropped % SIZE_BLOCK == 0:
                    run.dropped_sizes.append(0)
                run.dropped_sizes[-1] += len(text)
                run.dropped += 1
                self._kept -= 1
            run.check = check
            if not texts:
                self._keeping.popleft()

    def _forget_oldest(self) -> None:
        entry = self._entries.popleft()
        if isinstance(entry, _Run) and entry.texts:
            self._keeping.popleft()  # the oldest run is the oldest that keeps texts
            self._kept -= len(entry.texts)


def _too_much(start: int, most: int) -> ResumeRefused:
    return ResumeRefused(
        f"more than {most >> 20} MiB were sent after cursor {start}, more than a client "
        "may be behind: load the session instead"
    )


def _on(stream: str, wanted: str | None) -> bool:
    return wanted is ALL_STREAMS or stream == wanted


def cursor_of(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ResumeRefused(f"cursor {text!r} is not one this host issued") from None
