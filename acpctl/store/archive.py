"""Export and import of sessions as JSON and JSONL (lossless; Markdown, for reading, is
rendered in terminal/transcript.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acpctl.store.sessions import SessionMeta, SessionStore, valid_session_id

EXPORT_VERSION = 1


def export_jsonl(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    yield json.dumps(_header(meta)) + "\n"
    for event in store.iter_events(meta.id):
        yield json.dumps(event, ensure_ascii=False) + "\n"


def export_json(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    yield json.dumps(_header(meta))[:-1]
    yield ', "events": ['
    for index, event in enumerate(store.iter_events(meta.id)):
        yield ("," if index else "") + "\n" + json.dumps(event, ensure_ascii=False)
    yield "\n]}\n"


def _header(meta: SessionMeta) -> dict[str, Any]:
    """An export's head: its format, the session's id as ACP names it, the metadata."""
    return {"acpctlExport": EXPORT_VERSION, "sessionId": meta.id, "session": meta.to_json()}


class NotAnExport(ValueError):
    """The file is not an acpctl export."""


def _read_export(path: Path) -> tuple[dict[str, Any], list[Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise NotAnExport(f"{path}: not UTF-8 (byte {exc.start}), so not an acpctl export") from exc
    first_line = text.split("\n", 1)[0]
    try:
        header = json.loads(first_line)
    except (ValueError, RecursionError):
        header = None
    if isinstance(header, dict) and "events" not in header:  # JSONL: a header, then events
        return header, _jsonl_events(path, text)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise NotAnExport(f"{path}: neither a JSON nor a JSONL export ({reason})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("events", []), list):
        raise NotAnExport(f"{path}: not an acpctl export")
    return document, list(document.get("events") or [])


def _jsonl_events(path: Path, text: str) -> list[Any]:
    events = []
    for number, line in enumerate(text.splitlines()[1:], 2):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except RecursionError:
            raise NotAnExport(f"{path}: line {number} is nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise NotAnExport(
                f"{path}: line {number} is not JSON ({exc.msg}, column {exc.colno}); a JSONL "
                "export holds one event a line"
            ) from None
    return events


def import_session(store: SessionStore, path: Path) -> tuple[str, str | None]:
    """Store an exported session. Returns its id, and why it got a new one (None when it
    kept the exported id). Nothing is written for a file that is not a valid export."""
    header, events = _read_export(path)
    if header.get("acpctlExport") != EXPORT_VERSION or not isinstance(header.get("session"), dict):
        raise NotAnExport(f"{path}: not an acpctl export (no acpctlExport header)")
    try:
        meta = SessionMeta.from_json({"id": "x", **header["session"]})
        lines = [_event_line(event) for event in events]
    except (ValueError, RecursionError) as exc:
        raise NotAnExport(f"{path}: not a valid acpctl export: {exc}") from exc
    renamed = None
    if not valid_session_id(meta.id):
        renamed = f"its id {meta.id[:40]!r} cannot name a session directory"
    elif store.exists(meta.id):
        renamed = "its id was taken here"
    if renamed:
        meta.id = uuid.uuid4().hex
    writer = store.create(meta)
    for line in lines:
        writer.append(line)
    writer.close()
    return meta.id, renamed


def _event_line(event: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise ValueError("every event must be an object")
    json.dumps(event)  # raises RecursionError for what cannot be written back
    return event
