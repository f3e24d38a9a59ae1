"""What acpctl serves from its own store whatever the agent supports: session/list (newest
first, paged with an opaque cursor) and the replay of a session/load. The capabilities it
adds for them are in runner/handshake.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.channel import Channel
from acpctl.store.sessions import SessionMeta, SessionStore

LIST_PAGE_SIZE = 100
REPLAY_DRAIN_EVERY = 512


async def replay(store: SessionStore, session_id: str, out: Channel) -> None:
    """The stored updates of a session, as session/update notifications, streamed: the
    first reaches the editor before the whole log is read. Stored agent notifications go
    out as their own bytes."""
    for sent, line in enumerate(_replayed(store, session_id), 1):
        out.write(line)
        if sent % REPLAY_DRAIN_EVERY == 0:
            await out.drain()
    await out.drain()


def replay_now(store: SessionStore, session_id: str, out: Channel) -> None:
    """As replay, written out at once (for a live session, whose updates go on meanwhile)."""
    for line in _replayed(store, session_id):
        out.write(line)


def _replayed(store: SessionStore, session_id: str) -> Iterator[bytes]:
    for item in store.iter_replay(session_id):
        if isinstance(item, bytes):
            yield item
        else:
            yield jsonrpc.encode(
                jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": session_id, "update": item})
            )


def stored_sessions(store: SessionStore, agent: str, cwd: str | None) -> list[SessionMeta]:
    """`agent`'s readable sessions in acpctl's history, newest first."""
    # Imported here: a connection that never lists sessions needs no sqlite3.
    from acpctl.store.index import SessionIndex

    return [s.meta for s in SessionIndex(store).query(agent=agent, cwd=cwd) if s.problem is None]


def list_page(stored: list[SessionMeta], theirs: list[JsonObject], cursor: Any) -> JsonObject:
    """One page of session/list: acpctl's sessions and those only the agent knows, newest
    first."""
    offset = _decode_cursor(cursor)
    infos = [_info(meta) for meta in stored] + theirs
    infos.sort(key=lambda info: str(info.get("updatedAt") or ""), reverse=True)
    result: JsonObject = {"sessions": infos[offset : offset + LIST_PAGE_SIZE]}
    if offset + LIST_PAGE_SIZE < len(infos):
        result["nextCursor"] = _encode_cursor(offset + LIST_PAGE_SIZE)
    return result


def _info(meta: SessionMeta) -> JsonObject:
    info: JsonObject = {"sessionId": meta.id, "cwd": meta.cwd, "updatedAt": meta.updated}
    if meta.title:
        info["title"] = meta.title
    if meta.additional_directories:
        info["additionalDirectories"] = meta.additional_directories
    extra: JsonObject = {"agent": meta.agent, "turns": meta.turns, "created": meta.created}
    if meta.parent_id:
        extra["parentId"] = meta.parent_id
    info["_meta"] = {"acpctl": extra}
    return info


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["o"]
        if isinstance(offset, int) and offset >= 0:
            return offset
    except (ValueError, KeyError, TypeError):
        pass
    raise RpcError(acp.INVALID_PARAMS, f"invalid cursor {cursor!r}")
