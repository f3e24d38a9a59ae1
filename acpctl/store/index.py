"""An sqlite3 index of every session's metadata, beside the session directories.

The files are the truth: each row remembers the mtime and size of the session.json it was
read from, and every query first re-stats the session directories, re-reads what changed,
adds what is new and drops what is gone. A missing, stale or unreadable index rebuilds
itself; with no usable index at all, the store is scanned directly.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from acpctl import paths
from acpctl.store.lines import CorruptSession
from acpctl.store.sessions import (
    COUNT,
    EVENTS_FILE,
    META_FIELDS,
    SESSION_FILE,
    SessionMeta,
    SessionStore,
    valid_session_id,
)

# In a directory of its own (a leading dot: never a valid session id), so that SQLite's
# journal files come and go there, not in the store's directory, whose mtime is half of the
# store's change mark (see SessionStore.change_mark).
INDEX_DIR = ".index"
INDEX_FILE = "sessions.sqlite3"
OLD_INDEX_FILE = ".index.sqlite3"  # where acpctl 0.1 kept it: removed when found
RESCAN_AFTER_S = 60.0
SCHEMA_VERSION = 10
# The index's own columns, then one per metadata field (store/sessions.py's META_FIELDS).
_OWN_COLUMNS = ("mtime_ns INTEGER", "size INTEGER", "problem TEXT", "model TEXT")
_SQL_TYPES = {COUNT: "INTEGER"}
_COLUMNS = (
    *(column.split()[0] for column in _OWN_COLUMNS),
    *(f.column for f in META_FIELDS),
)
_TABLE = ", ".join(
    [
        *_OWN_COLUMNS,
        *(
            f"{f.column} {_SQL_TYPES.get(f.kind, 'TEXT')}{' PRIMARY KEY' if f.attr == 'id' else ''}"
            for f in META_FIELDS
        ),
    ]
)


# Where an index remembers the store's change mark it last scanned at (and when).
SCANNED_TABLE = "CREATE TABLE scanned (root_mtime INTEGER, changes INTEGER, at REAL)"


def scanned_at(connection: sqlite3.Connection, mark: tuple[int, int]) -> bool:
    """Whether the index was brought up to date at this change mark, less than
    RESCAN_AFTER_S ago (files edited by other means are seen at the latest then)."""
    last = connection.execute("SELECT root_mtime, changes, at FROM scanned").fetchone()
    return last is not None and tuple(last[:2]) == mark and time.time() - last[2] < RESCAN_AFTER_S


def record_scan(connection: sqlite3.Connection, mark: tuple[int, int]) -> None:
    """Remember the mark read before the scan: a change during it is seen by the next."""
    connection.execute("DELETE FROM scanned")
    connection.execute("INSERT INTO scanned VALUES (?, ?, ?)", (*mark, time.time()))


def _filters(
    agent: str | None, cwd: str | None, since: str | None = None
) -> tuple[list[str], list[str]]:
    """SQL conditions (and their values) on the sessions table."""
    clauses, values = [], []
    for column, value in (("agent", agent), ("cwd", cwd)):
        if value is not None:
            clauses.append(f"{column} = ?")
            values.append(value)
    if since is not None:
        clauses.append("(updated >= ? OR problem IS NOT NULL)")
        values.append(since)
    return clauses, values


@dataclass
class IndexedSession:
    meta: SessionMeta
    problem: str | None  # why the session's metadata could not be read
    model: str | None = None  # the model chosen for it, when it said


def chosen_model(meta: SessionMeta) -> str | None:
    """The session's model: chosen with session/set_model, or a config option `model`."""
    model = meta.state.get("model") or (meta.state.get("config") or {}).get("model")
    return model if isinstance(model, str) else None


def _row(meta: SessionMeta, mtime_ns: int, size: int, problem: str | None) -> tuple[object, ...]:
    return (
        mtime_ns,
        size,
        problem,
        chosen_model(meta),
        *(f.to_column(getattr(meta, f.attr)) for f in META_FIELDS),
    )


def _from_row(row: tuple[Any, ...]) -> IndexedSession:
    own = len(_OWN_COLUMNS)
    fields = {f.attr: f.from_column(value) for f, value in zip(META_FIELDS, row[own:], strict=True)}
    return IndexedSession(SessionMeta(**fields), row[2], row[3])


def _create(connection: sqlite3.Connection) -> None:
    connection.executescript(f"""
        DROP TABLE IF EXISTS sessions;
        CREATE TABLE sessions ({_TABLE});
        CREATE INDEX sessions_updated ON sessions (updated DESC, id DESC);
        DROP TABLE IF EXISTS scanned;
        {SCANNED_TABLE};
        PRAGMA user_version = {SCHEMA_VERSION};
    """)


class SessionIndex:
    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.path = store.root / INDEX_DIR / INDEX_FILE

    def _connect(self) -> sqlite3.Connection:
        paths.ensure_private_dir(self.path.parent)
        fresh = not self.path.exists()
        if fresh:
            (self.store.root / OLD_INDEX_FILE).unlink(missing_ok=True)
        connection = sqlite3.connect(self.path, timeout=10)
        if fresh:
            os.chmod(self.path, paths.PRIVATE_FILE_MODE)
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            _create(connection)
        return connection

    def _disk(self) -> Iterator[tuple[str, int, int, str | None]]:
        """(id, mtime_ns, size, problem) of every session directory on disk."""
        try:
            entries = list(os.scandir(self.store.root))
        except FileNotFoundError:
            return
        for entry in entries:
            if not valid_session_id(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                stat = os.stat(os.path.join(entry.path, SESSION_FILE))
            except FileNotFoundError:
                if not os.path.exists(os.path.join(entry.path, EVENTS_FILE)):
                    # No history in it: a backend's files for a session still being made
                    # (the pi a session host's spare starts ahead), not a session yet.
                    continue
                yield entry.name, -1, -1, f"{SESSION_FILE} is missing"
                continue
            yield entry.name, stat.st_mtime_ns, stat.st_size, None

    def _read(self, sid: str, problem: str | None) -> tuple[SessionMeta, str | None]:
        """The session's metadata, or an empty record and why it could not be read."""
        if problem is None:
            try:
                return self.store.read_meta(sid), None
            except CorruptSession as exc:
                problem = str(exc)
        return SessionMeta(id=sid, agent="", command=[], cwd="", created="", updated=""), problem

    def refresh(self, connection: sqlite3.Connection) -> int:
        """Bring the index up to date with the files; returns how many rows changed. The
        store is scanned when its change mark moved since the last scan (acpctl wrote or
        deleted a session, or a session directory came or went), and at least every
        RESCAN_AFTER_S (a session.json edited by other means)."""
        mark = self.store.change_mark()
        if scanned_at(connection, mark):
            return 0
        known = {
            sid: (mtime, size)
            for sid, mtime, size in connection.execute("SELECT id, mtime_ns, size FROM sessions")
        }
        changed: list[tuple[object, ...]] = []
        seen: set[str] = set()
        for sid, mtime, size, problem in self._disk():
            seen.add(sid)
            if known.get(sid) == (mtime, size) and problem is None:
                continue
            meta, problem = self._read(sid, problem)
            changed.append(_row(meta, mtime, size, problem))
        gone = [(sid,) for sid in known if sid not in seen]
        with connection:
            connection.executemany(
                f"INSERT OR REPLACE INTO sessions ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_COLUMNS))})",
                changed,
            )
            connection.executemany("DELETE FROM sessions WHERE id = ?", gone)
            record_scan(connection, mark)
        return len(changed) + len(gone)

    def readable(self, cwd: str | None = None) -> list[SessionMeta]:
        """Every readable session, newest update first; unreadable ones are left out."""
        return [s.meta for s in self.query(cwd=cwd) if s.problem is None]

    def query(
        self,
        agent: str | None = None,
        cwd: str | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> list[IndexedSession]:
        """Sessions newest first (unreadable ones last), filtered; refreshed first."""
        return self.page(agent, cwd, since, limit)[0]

    def page(
        self,
        agent: str | None = None,
        cwd: str | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[IndexedSession], int]:
        """The first `limit` sessions of `query`, and how many match in all."""
        with self._fresh() as connection:
            clauses, values = _filters(agent, cwd, since)
            where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
            sql = (
                f"SELECT {', '.join(_COLUMNS)} FROM sessions {where} "
                "ORDER BY problem IS NOT NULL, updated DESC, id DESC"
            )
            if limit is not None:
                sql += f" LIMIT {int(limit)}"
            found = [_from_row(row) for row in connection.execute(sql, values)]
            if limit is None or len(found) < limit:
                return found, len(found)
            (total,) = connection.execute(
                f"SELECT COUNT(*) FROM sessions {where}", values
            ).fetchone()
            return found, int(total)

    @contextlib.contextmanager
    def _fresh(self) -> Iterator[sqlite3.Connection]:
        """The index brought up to date. A corrupt index is only a cache: it is deleted and
        built again; one that cannot be kept at all (a read-only or full disk) is built in
        memory from the files, so every query runs the same SQL either way."""
        try:
            connection = self._connect()
        except (sqlite3.Error, OSError):
            connection = self._rebuilt_or_in_memory()
        with contextlib.closing(connection):
            try:
                self.refresh(connection)
            except sqlite3.Error:
                connection.close()
                connection = self._in_memory()
                self.refresh(connection)
            yield connection

    def _rebuilt_or_in_memory(self) -> sqlite3.Connection:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)
        try:
            return self._connect()
        except (sqlite3.Error, OSError):
            return self._in_memory()

    @staticmethod
    def _in_memory() -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:")
        _create(connection)
        return connection

    def rows(self, ids: Iterable[str]) -> dict[str, IndexedSession]:
        """These sessions (the readable ones among them), without listing all the rest."""
        wanted = list(dict.fromkeys(ids))
        with self._fresh() as connection:
            found = {}
            for start in range(0, len(wanted), 500):  # SQLite's limit on parameters
                chunk = wanted[start : start + 500]
                sql = (
                    f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE problem IS NULL "
                    f"AND id IN ({', '.join('?' * len(chunk))})"
                )
                for row in connection.execute(sql, chunk):
                    session = _from_row(row)
                    found[session.meta.id] = session
            return found

    def models(self, agent: str | None = None, cwd: str | None = None) -> dict[str, str | None]:
        """Every readable session's id (of this agent, in this directory) and its model."""
        with self._fresh() as connection:
            clauses, values = _filters(agent, cwd)
            where = " AND ".join(["problem IS NULL", *clauses])
            sql = f"SELECT id, model FROM sessions WHERE {where}"
            return dict(connection.execute(sql, values).fetchall())

    def resolve(self, text: str) -> str:
        """The one session `text` names: an id, a name, a unique id prefix, else a unique
        name prefix. Raises LookupError naming the candidates when none or several."""
        if valid_session_id(text) and self.store.exists(text):
            return text
        sessions = [s.meta for s in self.query() if s.problem is None]
        for matches in (
            [m for m in sessions if m.name == text],
            [m for m in sessions if m.id.startswith(text)],
            [m for m in sessions if m.name and m.name.startswith(text)],
        ):
            if len(matches) == 1:
                return matches[0].id
            if matches:
                shown = ", ".join(f"{m.id[:12]} ({m.name or m.title or ''})" for m in matches[:10])
                more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
                raise LookupError(f"{text!r} is ambiguous: {shown}{more}")
        raise LookupError(f"no stored session has the id or name {text!r}")

    def newest(self, agent: str | None = None) -> str:
        """The session updated last (of `agent`'s); LookupError when there is none."""
        found = self.query(agent=agent, limit=1)
        if not found or found[0].problem:
            raise LookupError("no sessions yet" + (f" of {agent}" if agent else ""))
        return found[0].meta.id

    def rebuild(self) -> None:
        self.path.unlink(missing_ok=True)
        with contextlib.closing(self._connect()) as connection:
            self.refresh(connection)

    def drift(self) -> list[str]:
        """How the index differs from the files (without changing it)."""
        if not self.path.exists():
            return ["the index is missing (it is rebuilt on the next listing)"]
        try:
            connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            with contextlib.closing(connection):
                known = {
                    sid: (mtime, size)
                    for sid, mtime, size in connection.execute(
                        "SELECT id, mtime_ns, size FROM sessions"
                    )
                }
        except sqlite3.Error as exc:
            return [f"the index is unreadable: {exc}"]
        problems = []
        disk = {sid: (mtime, size) for sid, mtime, size, _ in self._disk()}
        for sid in sorted(set(disk) - set(known)):
            problems.append(f"{sid}: on disk, not in the index")
        for sid in sorted(set(known) - set(disk)):
            problems.append(f"{sid}: in the index, not on disk")
        for sid in sorted(set(disk) & set(known)):
            if disk[sid] != known[sid]:
                problems.append(f"{sid}: changed since it was indexed")
        return problems
