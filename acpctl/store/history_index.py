"""What the history says, indexed for `sessions search` and `acpctl usage`: an SQLite file
beside the listing index, kept in step with each session's events.jsonl incrementally.

The events files are the truth. For each session the index remembers how many bytes of
events.jsonl it has read; a search or a usage report first reads what was appended since
(whole lines only: a line being written is read next time), and starts the session over
when its file got shorter (a repair, a re-import). Deleting the file rebuilds it all.

- `docs` (FTS5): the text of each turn's prompt, of the agent's answer, and the titles of
  its tool calls, with the session, the turn and the time. A turn read in two passes (it
  was running during the first) has two rows for its answer.
A fork's history begins with a copy of its parent's, up to a `fork` line: only what
follows it counts for the fork.

- `usage`: per session and day, the turns, the tokens prompt responses reported
  (`usage`), and the cost: `usage_update` carries a session's cumulative cost, so each
  update adds what it grew by, on its day (a cost that falls, as when an agent's session
  was started afresh, is a new running total: nothing is added for the fall). The context
  window's fill is not cumulative: each session keeps the last `used` of `size` reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from acpctl import paths
from acpctl import protocol as acp
from acpctl.store.index import (
    INDEX_DIR,
    SCANNED_TABLE,
    SessionIndex,
    record_scan,
    scanned_at,
)
from acpctl.store.lines import event_update, events_from
from acpctl.store.sessions import EVENTS_FILE, TURN_ENDS, SessionStore

HISTORY_FILE = "history.sqlite3"
SCHEMA_VERSION = 3
TOKEN_FIELDS = (
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "cachedReadTokens",
    "cachedWriteTokens",
    "thoughtTokens",
)
MARK_START, MARK_END = "\x02", "\x03"  # around a match in a snippet


@dataclass
class Hit:
    session: str
    turn: int
    kind: str  # prompt, answer or tool
    ts: float
    snippet: str  # the match between MARK_START and MARK_END


@dataclass
class UsageRow:
    session: str
    day: str  # YYYY-MM-DD, local time
    model: str | None
    turns: int
    tokens: dict[str, int]
    cost: dict[str, float]  # by currency


@dataclass
class _Reading:
    """One pass over a session's new lines: the rows it yields and where it stopped."""

    session: str
    turn: int
    last_cost: float
    currency: str | None
    model: str | None
    context: tuple[int, int] | None = None  # the last usage_update's used, size
    reported: bool = False  # the model is one the agent reported (usage_update), not chosen
    docs: list[tuple[str, str, int, str, float]] = field(default_factory=list)
    usage: dict[str, UsageRow] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    text_kind: str = ""
    text_ts: float = 0.0

    def flush(self) -> None:
        joined = "".join(self.text).strip()
        if joined:
            self.docs.append((joined, self.session, self.turn, self.text_kind, self.text_ts))
        self.text = []

    def add_text(self, kind: str, text: str, ts: float) -> None:
        if kind != self.text_kind:
            self.flush()
            self.text_kind, self.text_ts = kind, ts
        self.text.append(text)

    def day(self, ts: float) -> UsageRow:
        day = time.strftime("%Y-%m-%d", time.localtime(ts))
        row = self.usage.get(day)
        if row is None:
            row = self.usage[day] = UsageRow(self.session, day, self.model, 0, {}, {})
        return row

    def event(self, event: dict[str, Any]) -> None:
        stamp = event.get("ts")
        ts = float(stamp) if isinstance(stamp, (int, float)) else 0.0
        kind = event.get("type")
        if kind == "fork":  # what came before is the parent's, searched and counted there
            self.text, self.docs, self.usage = [], [], {}
            return
        if kind in TURN_ENDS:
            self.flush()
            self.text_kind = ""
            row = self.day(ts)
            row.turns += 1
            usage = event.get("usage")
            if isinstance(usage, dict):
                for name in TOKEN_FIELDS:
                    value = usage.get(name)
                    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                        row.tokens[name] = row.tokens.get(name, 0) + value
            self.turn += 1
            return
        update = event_update(event)
        if update is not None:
            self.update(update, ts)

    def update(self, update: dict[str, Any], ts: float) -> None:
        kind = update.get("sessionUpdate")
        content = update.get("content")
        if kind in (acp.USER_MESSAGE_CHUNK, acp.AGENT_MESSAGE_CHUNK):
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                role = "prompt" if kind == acp.USER_MESSAGE_CHUNK else "answer"
                self.add_text(role, content["text"], ts)
        elif kind in (acp.TOOL_CALL, acp.TOOL_CALL_UPDATE) and isinstance(update.get("title"), str):
            self.flush()
            self.text_kind = ""
            self.docs.append((update["title"], self.session, self.turn, "tool", ts))
        elif kind == acp.USAGE_UPDATE:
            model = reported_model(update)
            if model is not None:  # what ran, where the choice may say "default"
                self.model, self.reported = model, True
                self.day(ts).model = model
            self.cost(update.get("cost"), ts)
            used, size = update.get("used"), update.get("size")
            if isinstance(used, int) and isinstance(size, int) and _count(used) and _count(size):
                self.context = (used, size)

    def cost(self, cost: Any, ts: float) -> None:
        if not isinstance(cost, dict):
            return
        amount, currency = cost.get("amount"), cost.get("currency")
        if not isinstance(amount, (int, float)) or not isinstance(currency, str):
            return
        if currency != self.currency:  # another currency: its own running total
            self.currency, self.last_cost = currency, 0.0
        grown = float(amount) - self.last_cost
        self.last_cost = float(amount)
        if grown > 0:
            row = self.day(ts)
            row.cost[currency] = row.cost.get(currency, 0.0) + grown


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def reported_model(update: dict[str, Any]) -> str | None:
    """The model a usage_update says it counts: ACP's update has no field for it, so agents
    put it in `_meta` (claude-agent-acp: `_claude/model`); a key named `model`, or ending
    in `/model`."""
    meta = update.get("_meta")
    if not isinstance(meta, dict):
        return None
    for key, value in meta.items():
        if (key == "model" or key.endswith("/model")) and isinstance(value, str) and value:
            return value
    return None


class HistoryIndex:
    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.path = store.root / INDEX_DIR / HISTORY_FILE

    @contextlib.contextmanager
    def connected(self, listing: SessionIndex) -> Iterator[sqlite3.Connection]:
        """The index, up to date with the store: read again when the store's change mark
        moved since (a session's metadata written, one added or deleted: the recorder
        writes it after every turn) and at least every RESCAN_AFTER_S; else as it is, with
        no file looked at (a turn still running is found once it ends)."""
        try:
            connection = self._connect()
        except sqlite3.DatabaseError:
            self.path.unlink(missing_ok=True)  # only a cache: rebuilt from the files
            connection = self._connect()
        with contextlib.closing(connection):
            mark = self.store.change_mark()
            if not scanned_at(connection, mark):
                self.refresh(connection, listing.models())
                with connection:
                    record_scan(connection, mark)
            yield connection

    def _connect(self) -> sqlite3.Connection:
        paths.ensure_private_dir(self.path.parent)
        fresh = not self.path.exists()
        connection = sqlite3.connect(self.path, timeout=10)
        if fresh:
            os.chmod(self.path, paths.PRIVATE_FILE_MODE)
        if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            connection.executescript(f"""
                DROP TABLE IF EXISTS docs;
                CREATE VIRTUAL TABLE docs USING fts5(
                    text, session UNINDEXED, turn UNINDEXED, kind UNINDEXED, ts UNINDEXED);
                DROP TABLE IF EXISTS usage;
                CREATE TABLE usage (
                    session TEXT, day TEXT, model TEXT, turns INTEGER, tokens TEXT,
                    cost TEXT, PRIMARY KEY (session, day));
                DROP TABLE IF EXISTS scanned;
                {SCANNED_TABLE};
                DROP TABLE IF EXISTS progress;
                CREATE TABLE progress (
                    session TEXT PRIMARY KEY, offset INTEGER, turn INTEGER,
                    last_cost REAL, currency TEXT, used INTEGER, size INTEGER);
                PRAGMA user_version = {SCHEMA_VERSION};
            """)
        return connection

    def refresh(self, connection: sqlite3.Connection, models: dict[str, str | None]) -> int:
        """Read what was appended to each session's events since the last pass (the
        sessions by id, with their models); returns the bytes read."""
        known = {
            row[0]: row[1:]
            for row in connection.execute(
                "SELECT session, offset, turn, last_cost, currency, used, size FROM progress"
            )
        }
        read = 0
        with connection:
            for gone in set(known) - set(models):
                self._forget(connection, gone)
            for sid, model in models.items():
                events = self.store.session_dir(sid) / EVENTS_FILE
                try:
                    size = os.stat(events).st_size
                except OSError:
                    continue
                offset, turn, last_cost, currency, used, window = known.get(
                    sid, (0, 0, 0.0, None, None, None)
                )
                if size == offset:
                    continue
                if size < offset:  # rewritten: start this session over
                    self._forget(connection, sid)
                    offset, turn, last_cost, currency, used, window = 0, 0, 0.0, None, None, None
                context = (used, window) if used is not None and window is not None else None
                reading = _Reading(sid, turn, last_cost, currency, model, context)
                end = offset
                for event, position in events_from(events, offset):
                    reading.event(event)
                    end = position
                read += end - offset
                self._save(connection, reading, end)
        return read

    def _forget(self, connection: sqlite3.Connection, sid: str) -> None:
        for table in ("docs", "usage", "progress"):
            connection.execute(f"DELETE FROM {table} WHERE session = ?", (sid,))

    def _save(self, connection: sqlite3.Connection, reading: _Reading, end: int) -> None:
        reading.flush()
        connection.executemany(
            "INSERT INTO docs (text, session, turn, kind, ts) VALUES (?, ?, ?, ?, ?)",
            reading.docs,
        )
        for row in reading.usage.values():
            before = connection.execute(
                "SELECT turns, tokens, cost, model FROM usage WHERE session = ? AND day = ?",
                (row.session, row.day),
            ).fetchone()
            if before is not None:
                if not reading.reported and before[3] is not None:
                    row.model = before[3]  # reported by an earlier reading
                row.turns += before[0]
                for name, value in json.loads(before[1]).items():
                    row.tokens[name] = row.tokens.get(name, 0) + value
                for currency, amount in json.loads(before[2]).items():
                    row.cost[currency] = row.cost.get(currency, 0.0) + amount
            connection.execute(
                "INSERT OR REPLACE INTO usage VALUES (?, ?, ?, ?, ?, ?)",
                (
                    row.session,
                    row.day,
                    row.model,
                    row.turns,
                    json.dumps(row.tokens),
                    json.dumps(row.cost),
                ),
            )
        used, size = reading.context or (None, None)
        connection.execute(
            "INSERT OR REPLACE INTO progress VALUES (?, ?, ?, ?, ?, ?, ?)",
            (reading.session, end, reading.turn, reading.last_cost, reading.currency, used, size),
        )

    def search(
        self,
        connection: sqlite3.Connection,
        query: str,
        sessions: set[str] | None,
        since: float | None,
        limit: int,
    ) -> list[Hit]:
        """Best matches first (FTS5's bm25), within these sessions and since that time."""
        clauses = ["docs MATCH ?"]
        values: list[object] = [query]
        if since is not None:
            clauses.append("ts >= ?")
            values.append(since)
        if sessions is not None:
            connection.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (id TEXT PRIMARY KEY)")
            connection.execute("DELETE FROM wanted")
            connection.executemany("INSERT INTO wanted VALUES (?)", ((s,) for s in sessions))
            clauses.append("session IN (SELECT id FROM wanted)")
        sql = (
            f"SELECT session, turn, kind, ts, snippet(docs, 0, '{MARK_START}', '{MARK_END}', "
            f"'…', 16) FROM docs WHERE {' AND '.join(clauses)} ORDER BY rank LIMIT {int(limit)}"
        )
        return [Hit(*row) for row in connection.execute(sql, values)]

    def contexts(self, connection: sqlite3.Connection) -> dict[str, tuple[int, int]]:
        """Each session's context window as its agent last reported it: (used, size)."""
        sql = "SELECT session, used, size FROM progress WHERE used IS NOT NULL"
        return {sid: (used, size) for sid, used, size in connection.execute(sql)}

    def usage(self, connection: sqlite3.Connection, since_day: str | None) -> list[UsageRow]:
        sql = "SELECT session, day, model, turns, tokens, cost FROM usage"
        values: list[str] = []
        if since_day is not None:
            sql += " WHERE day >= ?"
            values.append(since_day)
        return [
            UsageRow(sid, day, model, turns, json.loads(tokens), json.loads(cost))
            for sid, day, model, turns, tokens, cost in connection.execute(sql, values)
        ]


def fts_query(text: str) -> str:
    """The words of a search as an FTS5 query: each word (or "a quoted phrase") must
    occur; a trailing * matches a prefix. Nothing of FTS5's own syntax gets through."""
    terms: list[str] = []
    for index, part in enumerate(text.split('"')):
        if index % 2:  # inside quotes: a phrase
            if part.strip():
                terms.append('"' + part.strip() + '"')
            continue
        for word in part.split():
            prefix = word.endswith("*") and len(word) > 1
            word = word.rstrip("*")
            if word:
                terms.append('"' + word.replace('"', "") + '"' + ("*" if prefix else ""))
    return " ".join(terms)
