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
    yield json.dumps({"acpctlExport": EXPORT_VERSION, "session": meta.to_json()}) + "\n"
    for event in store.iter_events(meta.id):
        yield json.dumps(event, ensure_ascii=False) + "\n"


def export_json(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    yield json.dumps({"acpctlExport": EXPORT_VERSION, "session": meta.to_json()})[:-1]
    yield ', "events": ['
    for index, event in enumerate(store.iter_events(meta.id)):
        yield ("," if index else "") + "\n" + json.dumps(event, ensure_ascii=False)
    yield "\n]}\n"


class NotAnExport(ValueError):
    """The file is not an acpctl export."""


def _read_export(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    text = path.read_text(encoding="utf-8")
    first_line = text.split("\n", 1)[0]
    try:
        header = json.loads(first_line)
        if isinstance(header, dict) and "events" not in header:
            events = [json.loads(line) for line in text.splitlines()[1:] if line.strip()]
            return header, events
    except ValueError:
        pass
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise NotAnExport(f"{path}: neither a JSON nor a JSONL export ({exc})") from exc
    if not isinstance(document, dict):
        raise NotAnExport(f"{path}: not an acpctl export")
    return document, list(document.get("events") or [])


def import_session(store: SessionStore, path: Path) -> tuple[str, bool]:
    """Store an exported session; returns its id and whether it had to get a new one
    (the exported id is taken, or unusable)."""
    header, events = _read_export(path)
    if header.get("acpctlExport") != EXPORT_VERSION or not isinstance(header.get("session"), dict):
        raise NotAnExport(f"{path}: not an acpctl export (no acpctlExport header)")
    meta = SessionMeta.from_json({"id": "x", **header["session"]})
    renamed = not valid_session_id(meta.id) or store.exists(meta.id)
    if renamed:
        meta.id = uuid.uuid4().hex
    writer = store.create(meta)
    for event in events:
        if isinstance(event, dict):
            writer.append(event)
    writer.close()
    return meta.id, renamed
