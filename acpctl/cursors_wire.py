"""The wire form of resumable delivery: where a message's cursor sits, put in by the session
host (host/) and taken out by the link (remote/), in one place so that both read it alike.

The cursor is `_meta["acp/cursor"]` in the message's params, else its result, else on the
envelope itself (acp-remote.md). A relayed notification keeps the agent's own bytes: the
host puts `"_meta":{"acp/cursor":"N"},` in as the first member of its params, as text,
where `protocol.params_opened` says that is certain, and the link takes exactly that member
out again, so the editor gets the agent's line as the agent wrote it.
"""

from __future__ import annotations

from typing import Any

from acpctl.jsontext import encode_text
from acpctl.protocol import CURSOR_META, params_opened


def _member(cursor: str) -> str:
    """`_meta` with only the cursor, as the first member of a notification's params."""
    return f'"_meta":{{"{CURSOR_META}":"{cursor}"}},'


def encoded_with(message: Any, cursor: str) -> str:
    """`message` encoded with its cursor: in its params, else its result, else on the
    envelope."""
    if isinstance(message, dict):
        for part in ("params", "result"):
            inner = message.get(part)
            if isinstance(inner, dict):
                meta = inner.get("_meta")
                meta = (
                    {**meta, CURSOR_META: cursor}
                    if isinstance(meta, dict)
                    else {CURSOR_META: cursor}
                )
                message = {**message, part: {**inner, "_meta": meta}}
                break
        else:
            message = {**message, "_meta": {CURSOR_META: cursor}}
    return encode_text(message)


def line_with(message: Any, line: bytes | str, cursor: str) -> str | None:
    """`line` (the notification `message`, decoded) with the cursor put in as the first
    member of its params, without encoding it again; None where that would not say what
    encoded_with says: params must be a non-empty object without `_meta`, where
    `protocol.params_opened` finds them."""
    if not isinstance(message, dict) or "method" not in message or "id" in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not params or "_meta" in params:
        return None
    return put_in(line, cursor)


def put_in(line: bytes | str, cursor: str) -> str | None:
    """`line` with the cursor as the first member of its params, where
    `protocol.params_opened` finds them (a line line_with took before: the host reading
    what it sent back from the history); None where it does not."""
    text = line.decode() if isinstance(line, bytes) else line
    cut = params_opened(text)
    if cut < 0:
        return None
    return text[:cut] + _member(cursor) + text[cut:]


def _place(message: dict[str, Any]) -> tuple[str | None, dict[str, Any]] | None:
    """The part of the message whose `_meta` holds the cursor (its params, else its result,
    else None: the envelope) and that part; None: no cursor."""
    for part in ("params", "result", None):
        holder: Any = message.get(part) if part else message
        meta = holder.get("_meta") if isinstance(holder, dict) else None
        if isinstance(meta, dict) and CURSOR_META in meta:
            return part, holder
    return None


def cursor_of(message: dict[str, Any]) -> str | None:
    place = _place(message)
    cursor = place[1]["_meta"][CURSOR_META] if place is not None else None
    return cursor if isinstance(cursor, str) else None


def without(message: dict[str, Any]) -> dict[str, Any]:
    """The message as it was before the cursor was put in: the cursor taken out of the
    `_meta` that held it (and that `_meta` too, when the cursor was all it held)."""
    place = _place(message)
    if place is None:
        return message
    part, holder = place
    rest = {k: v for k, v in holder["_meta"].items() if k != CURSOR_META}
    inner = {k: v for k, v in holder.items() if k != "_meta"}
    if rest:
        inner["_meta"] = rest
    return inner if part is None else {**message, part: inner}


def line_without(text: str, cursor: str) -> str | None:
    """The notification as the agent wrote it: `text` with the member that line_with put
    in taken out; None when it is not there just so (the message is then encoded again
    from what was decoded, without())."""
    cut = params_opened(text)
    member = _member(cursor)
    if cut < 0 or not text.startswith(member, cut):
        return None
    return text[:cut] + text[cut + len(member) :]
