"""What acpctl serves from its own store whatever the agent supports: session/list (newest
first, paged with an opaque cursor) and the replay of a session/load. The capabilities it
adds for them are in runner/handshake.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.channel import Channel
from acpctl.store.lines import StoredUpdate
from acpctl.store.sessions import SessionMeta, SessionStore

LIST_PAGE_SIZE = 100
REPLAY_DRAIN_EVERY = 512


@dataclass(frozen=True)
class Wanted:
    """What a client asked of a replay. `as_recorded`: every stored update as it came, else
    as the agent would replay them (_replayed); `answers`: the person's recorded answers
    too, in their place (acp.RECORDED_NOTE); `skip`: how many stored items the client has
    (attach's historyPolicy after_message: through_message)."""

    as_recorded: bool = False
    answers: bool = False
    skip: int = 0


async def replay(store: SessionStore, session_id: str, out: Channel, wanted: Wanted) -> int:
    """The stored updates of a session, as session/update notifications, streamed: the
    first reaches the editor before the whole log is read. Stored agent notifications go
    out as their own bytes. How many stored updates it covered (REPLAYED_META)."""
    items = _items(store, session_id, wanted)
    for sent, line in enumerate(_lines(items, session_id, wanted), 1):
        out.write(line)
        if sent == 1 or sent % REPLAY_DRAIN_EVERY == 0:  # the first at once
            await out.drain()
    await out.drain()
    return items.count


def replay_now(store: SessionStore, session_id: str, out: Channel, wanted: Wanted) -> int:
    """As replay, written out at once (for a live session, whose updates go on meanwhile)."""
    items = _items(store, session_id, wanted)
    for line in _lines(items, session_id, wanted):
        out.write(line)
    return items.count


def _items(store: SessionStore, session_id: str, wanted: Wanted) -> _Counted:
    return _Counted(store.replay_items(session_id, _events(wanted.answers)), wanted.skip)


def _events(answers: bool) -> frozenset[str]:
    """The stored events a replay reads besides the updates: the recorded answers."""
    return acp.RECORDED_EVENTS if answers else frozenset()


def through_message(store: SessionStore, session_id: str, message_id: str, answers: bool) -> int:
    """How many stored items (`answers`: the recorded answers counted too, as a replay
    that sends them reads them) go up to and including the last chunk of the message
    `message_id`: Wanted.skip. RpcError when the history has no such message (the
    client's copy is not this session's: it must ask for the full history)."""
    last = None
    for index, (update, _, _) in enumerate(store.replay_items(session_id, _events(answers))):
        if update is not None and update.get("messageId") == message_id:
            last = index
    if last is None:
        raise RpcError(
            acp.INVALID_PARAMS,
            f"message {message_id!r} is not in the session's history: attach with "
            'historyPolicy "full"',
            {"messageId": message_id},
        )
    return last + 1


def with_replayed(result: JsonObject, replayed: int | None) -> JsonObject:
    """`result` with how many stored updates its replay covered (REPLAYED_META)."""
    if replayed is None:
        return result
    meta = result.get("_meta")
    return {
        **result,
        "_meta": {**(meta if isinstance(meta, dict) else {}), acp.REPLAYED_META: replayed},
    }


def wants_recorded(params: JsonObject) -> bool:
    """Whether a load asks for its replay as recorded (`_meta["acpctl/replay"]`: acpctl's
    own remote link, which deduplicates a reload against what the editor was sent)."""
    meta = params.get("_meta")
    return isinstance(meta, dict) and meta.get(acp.REPLAY_META) == acp.REPLAY_AS_RECORDED


# (update, event, line); the update None: a recorded answer (acp.RECORDED_NOTE).
Item = tuple[JsonObject | None, JsonObject, bytes]


class _Counted:
    """The stored updates a replay reads, counted: a joined replay sends fewer lines than
    it covers, and acpctl's link needs the count to leave a reload's first ones out. The
    recorded answers are not counted: they are no update. The first `skip` items (updates
    and answers) are counted, not yielded: the client has them."""

    def __init__(self, items: Iterator[Item], skip: int = 0) -> None:
        self._items = items
        self._skip = skip
        self.count = 0

    def __iter__(self) -> Iterator[Item]:
        for index, item in enumerate(self._items):
            if item[0] is not None:
                self.count += 1
            if index >= self._skip:
                yield item


def _lines(items: _Counted, session_id: str, wanted: Wanted) -> Iterator[bytes]:
    if not wanted.as_recorded:
        # A client that asked for the recorded answers is told when each prompt was sent.
        return _replayed(items, session_id, stamped=wanted.answers)
    return (
        _line(StoredUpdate(update, event, line, session_id), session_id)
        if update is not None
        else recorded_line(session_id, event)
        for update, event, line in items
    )


def recorded_line(session_id: str, event: JsonObject) -> bytes:
    """A recorded answer (or question) as a replay sends it (acp.RECORDED_NOTE)."""
    return jsonrpc.encode(
        jsonrpc.notification(acp.RECORDED_NOTE, {"sessionId": session_id, "event": event})
    )


# What a replay leaves out or moves (issue 32, 9): the load's answer says the mode and the
# config options as they are now, so their old updates would only say what was; of usage
# and commands only the newest holds, after the rest. Every other kind, known or not, is
# replayed as it was recorded.
STATE_NOW = frozenset({acp.CURRENT_MODE_UPDATE, acp.CONFIG_OPTION_UPDATE})
# Recorded, but no part of the conversation an agent replays: a notice is "information
# for the user that is not part of session history" (ACP's session notices).
LIVE_ONLY = frozenset({acp.NOTICE})
NEWEST_ONLY = (acp.USAGE_UPDATE, acp.AVAILABLE_COMMANDS_UPDATE)
CHUNKS = frozenset({acp.AGENT_MESSAGE_CHUNK, acp.AGENT_THOUGHT_CHUNK, acp.USER_MESSAGE_CHUNK})
PLAIN_CHUNK_KEYS = frozenset({"sessionUpdate", "content", "messageId"})


def _replayed(items: _Counted, session_id: str, stamped: bool = False) -> Iterator[bytes]:
    """The session's lines as the agent would replay them: the stream's fragments of one
    message joined into one update, state as it is now. `stamped`: each prompt's with when
    it was sent (AT_META)."""
    first: StoredUpdate | None = None  # the first plain text chunk of a message, not yet sent
    texts: list[str] = []  # the texts of its run, to be joined
    newest: dict[str, StoredUpdate] = {}
    for update, event, line in items:
        if update is None:
            if first is not None:
                yield _joined(first, texts, session_id, stamped)
                first, texts = None, []
            yield recorded_line(session_id, event)
            continue
        kind = update.get("sessionUpdate")
        if kind in STATE_NOW or kind in LIVE_ONLY:
            continue
        if kind in NEWEST_ONLY:
            newest[str(kind)] = StoredUpdate(update, event, line, session_id)
            continue
        plain = kind in CHUNKS and _plain_chunk(update)
        if (
            plain
            and first is not None
            and kind == first.update["sessionUpdate"]
            and update.get("messageId") == first.update.get("messageId")
        ):
            texts.append(update["content"]["text"])
            continue
        if first is not None:
            yield _joined(first, texts, session_id, stamped)
        if plain:
            first = StoredUpdate(update, event, line, session_id)
            texts = [update["content"]["text"]]
        else:
            first, texts = None, []
            yield _line(StoredUpdate(update, event, line, session_id), session_id)
    if first is not None:
        yield _joined(first, texts, session_id, stamped)
    for kind in NEWEST_ONLY:
        if kind in newest:
            yield _line(newest[kind], session_id)


def _plain_chunk(update: JsonObject) -> bool:
    """A chunk of text and nothing else (no _meta, annotations or other content), which
    can be joined to its neighbours without losing a thing."""
    content = update.get("content")
    return (
        type(content) is dict
        and len(content) == 2
        and content.get("type") == "text"
        and type(content.get("text")) is str
        and update.keys() <= PLAIN_CHUNK_KEYS
    )


def _joined(first: StoredUpdate, texts: list[str], session_id: str, stamped: bool) -> bytes:
    prompt = first.update.get("sessionUpdate") == acp.USER_MESSAGE_CHUNK
    at = first.event.get("ts") if stamped and prompt else None
    if len(texts) == 1 and not at:
        return _line(first, session_id)
    joined = {**first.update, "content": {"type": "text", "text": "".join(texts)}}
    return update_line(session_id, joined, {acp.AT_META: at} if at else None)


def _line(stored: StoredUpdate, session_id: str) -> bytes:
    raw = stored.raw()
    return raw if raw is not None else update_line(session_id, stored.update)


def update_line(session_id: str, update: JsonObject, meta: JsonObject | None = None) -> bytes:
    """A session/update notification of `update` (with `meta` as its params' _meta), as a
    line."""
    params: JsonObject = {"sessionId": session_id, "update": update}
    if meta:
        params["_meta"] = meta
    return jsonrpc.encode(jsonrpc.notification(acp.SESSION_UPDATE, params))


def stored_sessions(store: SessionStore, agent: str, cwd: str | None) -> list[SessionMeta]:
    """`agent`'s readable sessions in acpctl's history, newest first."""
    # Imported here: a connection that never lists sessions needs no sqlite3.
    from acpctl.store.index import SessionIndex

    return [s.meta for s in SessionIndex(store).query(agent=agent, cwd=cwd) if s.problem is None]


def list_page(
    stored: list[SessionMeta],
    theirs: list[JsonObject],
    cursor: Any,
    archived: set[str] | None = None,
) -> JsonObject:
    """One page of session/list: acpctl's sessions and those only the agent knows, newest
    first. `archived`: which of acpctl's the agent reports archived, when it archives (each
    of them then says whether it is)."""
    offset = _decode_cursor(cursor)
    infos = [_info(meta) for meta in stored]
    if archived is not None:
        infos = [{**info, "archived": info["sessionId"] in archived} for info in infos]
    infos += theirs
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
    if meta.subagent_of:
        extra["subagentOf"] = meta.subagent_of
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
