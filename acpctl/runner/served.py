"""What acpctl serves from its own store whatever the agent supports: the capabilities it
adds for that, session/list (newest first, paged with an opaque cursor), and the replay of
a session/load."""

from __future__ import annotations

import base64
import json
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.endpoint import LineOutput
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionMeta, SessionStore

LIST_PAGE_SIZE = 100
REPLAY_DRAIN_EVERY = 512
SESSION_CAPABILITIES_SERVED = ("list", "resume", "close", "delete")


def capabilities(agent: Any) -> JsonObject:
    """The agent's capabilities plus load, list, resume, close and delete."""
    capabilities = dict(agent) if isinstance(agent, dict) else {}
    capabilities["loadSession"] = True
    session_caps = capabilities.get("sessionCapabilities")
    session_caps = dict(session_caps) if isinstance(session_caps, dict) else {}
    for name in SESSION_CAPABILITIES_SERVED:
        if not isinstance(session_caps.get(name), dict):
            session_caps[name] = {}
    capabilities["sessionCapabilities"] = session_caps
    return capabilities


async def replay(store: SessionStore, session_id: str, out: LineOutput) -> None:
    """The stored updates of a session, as session/update notifications, streamed: the
    first reaches the editor before the whole log is read."""
    for sent, update in enumerate(store.iter_updates(session_id), 1):
        out.send(
            jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        )
        if sent % REPLAY_DRAIN_EVERY == 0:
            await out.drain()
    await out.drain()


def list_page(store: SessionStore, params: JsonObject) -> JsonObject:
    cwd = params.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise RpcError(acp.INVALID_PARAMS, "cwd must be a string")
    offset = _decode_cursor(params.get("cursor"))
    metas = SessionIndex(store).readable(cwd=cwd)
    result: JsonObject = {
        "sessions": [_info(meta) for meta in metas[offset : offset + LIST_PAGE_SIZE]]
    }
    if offset + LIST_PAGE_SIZE < len(metas):
        result["nextCursor"] = _encode_cursor(offset + LIST_PAGE_SIZE)
    return result


def _info(meta: SessionMeta) -> JsonObject:
    info: JsonObject = {"sessionId": meta.id, "cwd": meta.cwd, "updatedAt": meta.updated}
    if meta.title:
        info["title"] = meta.title
    if meta.additional_directories:
        info["additionalDirectories"] = meta.additional_directories
    info["_meta"] = {"acpctl": {"agent": meta.agent, "turns": meta.turns, "created": meta.created}}
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
