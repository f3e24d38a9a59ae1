"""The sessions the editor has open through the link (remote/link_state.py), and what of each
it has seen: what a new connection opens again, and which of a reload's replayed updates
the editor has already, so that it is shown only what it has not."""

from __future__ import annotations

import collections
import logging
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsontext import encode_text


class OpenSession:
    """A session the editor has open: how it opened it, and what updates of it it has."""

    __slots__ = ("method", "params", "replayed", "replaying", "seen", "skipping")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params
        self.seen: collections.Counter[int] = collections.Counter()
        self.replaying: collections.Counter[int] | None = None  # reloading: what to skip
        # How many stored updates the editor has had by a replay (acpctl serve says, in
        # the answer: its replay joins a message's fragments, so the lines do not match a
        # reload's as recorded); a reload leaves out that many first.
        self.replayed = 0
        self.skipping = 0


class Reload:
    """One request of a new connection's setup: the editor's initialize again, or a
    session opened again (`session` set: its replay is deduplicated)."""

    __slots__ = ("method", "params", "session")

    def __init__(
        self, method: str, params: dict[str, Any], session: OpenSession | None = None
    ) -> None:
        self.method = method
        self.params = params
        self.session = session


def own_prompt(sessions: dict[str, OpenSession], params: dict[str, Any]) -> None:
    """The prompt's text comes back in a reload's replay as user_message_chunk updates,
    which the editor never got live: counted as seen."""
    session = sessions.get(str(params.get("sessionId")))
    blocks = params.get("prompt")
    if session is None or not isinstance(blocks, list):
        return
    for block in blocks:
        update = {"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": block}
        # As acpctl serve replays a prompt it recorded: encoded by acpctl, whose text
        # the cursor leaves as it was.
        echoed = {"sessionId": params["sessionId"], "update": update}
        try:
            text = encode_text(jsonrpc.notification(acp.SESSION_UPDATE, echoed))
        except ValueError:
            continue
        session.seen[hash(text)] += 1


ESTABLISHING = frozenset(
    {acp.SESSION_NEW, acp.SESSION_LOAD, acp.SESSION_RESUME, acp.SESSION_FORK, acp.SESSION_ATTACH}
)


def opened_or_closed(
    sessions: dict[str, OpenSession], method: str, params: dict[str, Any], result: dict[str, Any]
) -> bool:
    """An answer of the host's to the editor's `method`: the session it opened (or joined)
    kept, the one it closed forgotten; whether the open sessions changed."""
    if method in ESTABLISHING:
        session_id = result.get("sessionId", params.get("sessionId"))
        if not isinstance(session_id, str):
            return False
        known = session_id in sessions
        if not known:
            sessions[session_id] = OpenSession(method, params)
        sessions[session_id].replayed = replayed(result)
        return not known
    return (
        method == acp.SESSION_CLOSE and sessions.pop(str(params.get("sessionId")), None) is not None
    )


def reload_steps(
    sessions: dict[str, OpenSession], initialize: dict[str, Any] | None, can_load: bool
) -> list[Reload]:
    """What sets a new connection up as the editor had it: its initialize again, then each
    open session opened again (loaded, attached, or resumed when the agent cannot load)."""
    steps = [Reload(acp.INITIALIZE, initialize)] if initialize is not None else []
    for session_id, session in sessions.items():
        params = {
            "sessionId": session_id,
            "cwd": session.params.get("cwd", "/"),
            "mcpServers": session.params.get("mcpServers", []),
            # acpctl serve replays it as recorded, update for update, so that what the
            # editor has can be left out; other servers ignore it.
            "_meta": {acp.REPLAY_META: acp.REPLAY_AS_RECORDED},
        }
        if session.method == acp.SESSION_ATTACH:  # joined again in the role it had
            steps.append(Reload(acp.SESSION_ATTACH, {**session.params, **params}, session))
        elif can_load:
            steps.append(Reload(acp.SESSION_LOAD, params, session))
        else:
            steps.append(Reload(acp.SESSION_RESUME, params))
    return steps


def reloading(step: Reload) -> None:
    """`step`'s request goes out: its replay is deduplicated until `reloaded`."""
    session = step.session
    if session is not None:
        session.replaying = collections.Counter(session.seen)
        session.skipping = session.replayed


def reloaded(step: Reload, answer: dict[str, Any] | None, log: logging.Logger) -> None:
    session = step.session
    if answer is not None and "error" in answer:
        log.warning("%s on reconnect failed: %s", step.method, answer["error"])
    if session is None:
        return
    session.replaying = None
    session.skipping = 0
    result = answer.get("result") if answer is not None else None
    if isinstance(result, dict):
        session.replayed = replayed(result)  # the editor has all of it now


def replay_under_way(sessions: dict[str, OpenSession], message: dict[str, Any]) -> bool:
    """Whether the message is about a session whose reload's replay is under way."""
    params = message.get("params")
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    session = sessions.get(str(session_id))
    return session is not None and session.replaying is not None


def skip_replayed(
    sessions: dict[str, OpenSession], message: dict[str, Any], text: str | None
) -> bool:
    """Whether an update of the host's is one the editor has (a reload's replay): left
    out; else it is counted as seen."""
    params = message.get("params")
    if not isinstance(params, dict):
        return False
    session = sessions.get(str(params.get("sessionId")))
    if session is None:
        return False
    if session.replaying is not None and session.skipping > 0:
        session.skipping -= 1
        return True
    mark = hash(text) if text is not None else fingerprint(params.get("update"))
    if session.replaying is not None and session.replaying[mark] > 0:
        session.replaying[mark] -= 1
        return True
    seen = session.seen
    seen[mark] = seen.get(mark, 0) + 1  # not Counter's __missing__, a Python call
    return False


def replayed(result: dict[str, Any]) -> int:
    """How many stored updates the answer's replay covered (0: the host did not say)."""
    meta = result.get("_meta")
    count = meta.get(acp.REPLAYED_META) if isinstance(meta, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def fingerprint(update: Any) -> int:
    """What tells one update from another when its text was encoded again (a slow path on
    both sides, live and in the replay alike): its JSON, keys in the order they came (the
    store keeps the agent's order). Otherwise the text itself, as the agent wrote it, tells
    (acpctl serve replays a recorded agent line as its own bytes)."""
    try:
        return hash(encode_text(update))
    except ValueError:
        return 0


def without_replayed(message: dict[str, Any]) -> dict[str, Any]:
    """An answer without what the host said of its replay (the link's, not the editor's)."""
    result = message.get("result")
    if not isinstance(result, dict):
        return message
    meta = result.get("_meta")
    if not isinstance(meta, dict) or acp.REPLAYED_META not in meta:
        return message
    rest = {k: v for k, v in meta.items() if k != acp.REPLAYED_META}
    inner = {k: v for k, v in result.items() if k != "_meta"}
    return {**message, "result": {**inner, **({"_meta": rest} if rest else {})}}
