"""`acpctl sessions verify`: check every session's files, and repair what can be repaired."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from acpctl import paths
from acpctl.files import atomic_write
from acpctl.store.index import SessionIndex
from acpctl.store.lines import CorruptSession, event_update, open_private
from acpctl.store.sessions import (
    EVENTS_FILE,
    TURN_ENDS,
    SessionMeta,
    SessionStore,
    title_from_prompt,
    utc_stamp,
    valid_session_id,
)


@dataclass
class Finding:
    session: str
    problem: str
    repaired: bool = False


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    checked: int = 0

    def add(self, session: str, problem: str, repaired: bool) -> None:
        self.findings.append(Finding(session, problem, repaired))


def _scan_events(path: str) -> tuple[list[int], bool, int, int]:
    """(corrupt line numbers, torn last line, turn ends, size of the good prefix)."""
    corrupt: list[int] = []
    torn = False
    turns = 0
    good = 0
    try:  # not through a link, nor a FIFO (CorruptSession: the caller reports it)
        handle = os.fdopen(open_private(path, os.O_RDONLY), "rb")
    except FileNotFoundError:
        return corrupt, torn, turns, good
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                torn = True
                break
            good += len(line)
            try:
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise ValueError("not an object")
            except ValueError:
                corrupt.append(number)
                continue
            if event.get("type") in TURN_ENDS:  # a failed turn is a turn: as recorded
                turns += 1
    return corrupt, torn, turns, good


def _rebuild_meta(store: SessionStore, sid: str) -> SessionMeta:
    """Metadata recovered from the event log, when session.json is lost."""
    first_prompt: list[object] = []
    stamps: list[float] = []
    turns = 0
    for event in store.iter_events(sid):
        if isinstance(event.get("ts"), int | float):
            stamps.append(float(event["ts"]))
        update = event_update(event)
        if update and update.get("sessionUpdate") == "user_message_chunk" and not first_prompt:
            first_prompt.append(update.get("content"))
        turns += event.get("type") in TURN_ENDS

    iso = utc_stamp

    now = datetime.now(timezone.utc).timestamp()
    return SessionMeta(
        id=sid,
        agent="unknown",
        command=[],
        cwd="",
        title=title_from_prompt(first_prompt),
        created=iso(min(stamps, default=now)),
        updated=iso(max(stamps, default=now)),
        turns=turns,
    )


def verify(store: SessionStore, repair: bool) -> Report:
    report = Report()
    try:
        names = sorted(os.listdir(store.root))
    except FileNotFoundError:
        return report
    for sid in names:
        directory = store.root / sid
        if sid.startswith("."):
            continue
        if directory.is_symlink():
            report.add(
                sid, "the session's directory is a symbolic link; acpctl does not follow it", False
            )
            continue
        if not directory.is_dir():
            continue
        if not valid_session_id(sid):
            report.add(sid, "directory name is not a valid session id", False)
            continue
        report.checked += 1
        _check_modes(directory, sid, repair, report)
        turns = _check_events(directory / EVENTS_FILE, sid, repair, report)
        _check_meta(store, sid, turns, repair, report)
    # The index is a cache that every listing brings up to date: do what a listing does,
    # then report only what that could not mend.
    index = SessionIndex(store)
    index.query()
    drift = index.drift()
    if drift:
        if repair:
            index.rebuild()
        for problem in drift:
            report.add("index", problem, repair)
    return report


def _check_modes(directory: Path, sid: str, repair: bool, report: Report) -> None:
    for problem, path, mode in mode_problems(directory):
        if repair:
            path.chmod(mode)
        report.add(sid, problem, repair)


def mode_problems(directory: Path) -> list[tuple[str, Path, int]]:
    """What in a session's directory is not private, all the way down (a backend's child
    writes files there too): (problem, path, the mode it should have). `acpctl doctor`
    asks the same question."""
    problems = []
    for root, subdirectories, files in os.walk(directory):
        here = Path(root)
        entries = [(here, paths.PRIVATE_DIR_MODE)] if here == directory else []
        entries += [(here / name, paths.PRIVATE_DIR_MODE) for name in subdirectories]
        entries += [(here / name, paths.PRIVATE_FILE_MODE) for name in files]
        for path, wanted in entries:
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode != wanted:
                name = path.relative_to(directory).as_posix() if path != directory else ""
                what = f"{name} mode" if name else "directory mode"
                problems.append((f"{what} is {mode:o}, not {wanted:o}", path, wanted))
    return problems


def _check_events(events: Path, sid: str, repair: bool, report: Report) -> int | None:
    """Torn and corrupt lines of the event log; returns the turns it records (None: it
    cannot be read, and nothing is repaired from it)."""
    try:
        corrupt, torn, turns, good = _scan_events(str(events))
    except CorruptSession as exc:
        report.add(sid, str(exc), False)
        return None
    if torn:
        if repair:
            with open(events, "r+b") as handle:
                handle.truncate(good)
        report.add(sid, f"{EVENTS_FILE}: torn last line (a crash mid-write)", repair)
    if corrupt:
        shown = ", ".join(map(str, corrupt[:5])) + ("..." if len(corrupt) > 5 else "")
        if repair:
            _drop_lines(events, set(corrupt))
        report.add(
            sid,
            f"{EVENTS_FILE}: {len(corrupt)} corrupt line(s): {shown}"
            + (" (moved to events.corrupt.jsonl)" if repair else ""),
            repair,
        )
    return turns


def _check_meta(
    store: SessionStore, sid: str, turns: int | None, repair: bool, report: Report
) -> None:
    """session.json readable (else rebuilt from the log), its turn count the log's."""
    try:
        meta = store.read_meta(sid)
    except CorruptSession as exc:
        repairable = repair and turns is not None
        if repairable:
            store.write_meta(_rebuild_meta(store, sid))
        report.add(
            sid, f"{exc}" + ("; rebuilt from the event log" if repairable else ""), repairable
        )
        return
    if turns is not None and meta.turns != turns:
        recorded = meta.turns
        if repair:
            meta.turns = turns
            store.write_meta(meta)
        report.add(sid, f"session.json counts {recorded} turns, the log {turns}", repair)


def _drop_lines(path: os.PathLike[str], numbers: set[int]) -> None:
    """Move corrupt lines aside (never delete data) and rewrite the log atomically."""
    kept: list[bytes] = []
    dropped: list[bytes] = []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            (dropped if number in numbers else kept).append(line)
    aside = os.fspath(path).replace(EVENTS_FILE, "events.corrupt.jsonl")
    fd = os.open(aside, os.O_WRONLY | os.O_APPEND | os.O_CREAT, paths.PRIVATE_FILE_MODE)
    with os.fdopen(fd, "ab") as handle:
        handle.writelines(dropped)
    atomic_write(Path(path), b"".join(kept))
