"""The link's protocol state, apart from its I/O, as the websockets library keeps a sans-I/O
protocol object beside its asyncio connection (remote/link.py is the I/O). It knows what
the editor asked and waits for, what the host asked and the editor holds, the sessions open
and what of them the editor has seen, what to send again after a drop, and what waits while
the link is down. Events go in (the editor sent, the host sent, a transport came up or
dropped); what to write comes out, in `to_host` and `to_editor`, for the I/O to write.

- After a resume (the same logical connection), the requests unanswered on it are sent
  again (acpctl serve runs a request id it has seen once only, so nothing runs twice), and
  so are the answers and notifications the editor sent (a repeated answer is dropped there).
- After a new connection (the host no longer held the old one), the editor's initialize is
  sent again, then each open session is loaded (or attached) again, its replay deduplicated
  against what the editor has. A request that went out on the lost connection may have run
  there, so it is never sent again: the editor gets an error for it. A permission request
  the host asks again (it does, of a client that joins) is matched to the one the editor
  holds, so the editor's one answer reaches it.
- While down, the editor's messages are held (within MAX_HELD); past the outage limit every
  waiting request fails with an error that says since when the link is down and why.

What the host sends reaches the editor unchanged but for the transport's
`_meta["acp/cursor"]` and the ids of the host's requests (numbered here: a new connection
numbers its own from the start again)."""

from __future__ import annotations

import collections
import itertools
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from acpctl import cursors_wire, jsonrpc
from acpctl import protocol as acp
from acpctl.capabilities import AgentCapabilities, advertises_resumable
from acpctl.jsonrpc.pending import PendingRequests
from acpctl.remote.link_phase import MOVES, NoSuchMove, Phase
from acpctl.remote.link_records import Ask, History, Waiting, ask_fingerprint, own_ids, unreadable
from acpctl.remote.link_sessions import (
    OpenSession,
    Reload,
    opened_or_closed,
    own_prompt,
    reload_steps,
    reloaded,
    reloading,
    replay_under_way,
    skip_replayed,
    without_replayed,
)
from acpctl.remote.transport import decoded

LINK_DOWN = -32010  # acpctl's error code: the agent's host cannot be reached
HOST_STOPPED = "the session host stopped"
MAX_HELD = 1000  # messages from the editor held while the link is down
MAX_HELD_BYTES = 16 << 20
MAX_RESENT = 10_000  # answers and notifications kept to send again after a resume
# Requests that change nothing at the host: sent again on a new connection when the one
# they went out on was lost before their answer.
SAFE_TO_REPEAT = frozenset({acp.INITIALIZE, acp.SESSION_LIST})


class LinkState:
    def __init__(self, describe: str, log: logging.Logger) -> None:
        self.describe = describe  # where the host is, for the log and errors
        self._log = log
        self.to_host: list[str] = []  # for the transport up now
        self.to_editor: list[bytes] = []
        self.connection = 0  # logical connections opened so far
        self.phase = Phase.NEW
        # Whether the host resumes a dropped connection: it says so at initialize (the
        # resumable-delivery draft). One that does not (the SDKs' servers) gets a new one.
        self.resumable = False
        self.waiting: dict[tuple[bool, Any], Waiting] = {}
        self.held: collections.deque[bytes] = collections.deque()
        self._held_bytes = 0
        self._resend: collections.deque[str] = collections.deque(maxlen=MAX_RESENT)
        self._asks: dict[tuple[bool, Any], Ask] = {}  # by the id the editor sees
        self._ask_ids = itertools.count(1)
        # The link's own requests (a new connection's setup), in the one pending table.
        self.own: PendingRequests[str] = PendingRequests(own_ids())
        self._initialize: dict[str, Any] | None = None  # the editor's params
        self._capabilities = AgentCapabilities()  # the agent's, from initialize
        self.sessions: dict[str, OpenSession] = {}
        self.down_since: float | None = None  # time.time() when the link went down
        self.down_reason = ""
        self._how = ""  # how the transport up now came: said when the link is back
        # What the host said when it told its clients it stops: after that, a link given up
        # ends (the exit status says so), not waiting for the editor's next message.
        self.stopping: str | None = None
        # Told the open sessions' ids whenever they change (the run record, `acpctl ps`).
        self.on_sessions: Callable[[list[str]], None] = lambda ids: None
        self.history: History | None = None  # this machine's record of what is relayed

    # -- the phase --------------------------------------------------------------------

    def _move(self, phase: Phase) -> None:
        if phase not in MOVES[self.phase]:
            raise NoSuchMove(f"the link cannot go from {self.phase.value} to {phase.value}")
        self.phase = phase

    @property
    def open(self) -> bool:
        """A transport is up (maybe still setting up a new connection)."""
        return self.phase in (Phase.SETTING_UP, Phase.UP)

    @property
    def live(self) -> bool:
        """... and it takes the editor's messages."""
        return self.phase is Phase.UP

    @property
    def given_up(self) -> bool:
        return self.phase is Phase.GIVEN_UP

    # -- the transports ---------------------------------------------------------------

    def came_up(self, resumed: bool) -> list[Reload]:
        """A transport is up; what the new connection needs first (nothing when it
        resumed: what may have been lost in flight is in `to_host`)."""
        self._move(Phase.SETTING_UP)
        if resumed:
            self._how = "resumed"
            self._resend_after_resume()
            return []
        self._how = f"a new connection, {len(self.sessions)} session(s) reloaded"
        previous, self.connection = self.connection, self.connection + 1
        return self._reopen() if previous else []

    def set_up(self) -> None:
        """The connection is set up: the editor's messages flow again."""
        self._move(Phase.UP)
        if self.down_since is not None:
            took, how = time.time() - self.down_since, self._how
            first = self.connection == 1 and how != "resumed"  # never up before this
            said = "is up" if first else "is back"
            self._log.info("the link to %s %s after %.1f s (%s)", self.describe, said, took, how)
            self._tell_state({"state": "up", "after": round(took, 1), "how": how, "first": first})
        self.down_since = None
        self.stopping = None
        self._send_held()

    def went_down(self, reason: str) -> None:
        self._move(Phase.GIVEN_UP if self.given_up else Phase.DOWN)
        if self.stopping is not None:
            reason = HOST_STOPPED
        if self.down_since is None:
            self.down_since = time.time()
            never = self.connection == 0  # it did not drop: it never connected
            said = "could not connect" if never else "dropped"
            self._log.warning("the link to %s %s: %s; trying again", self.describe, said, reason)
            told = {
                "state": "down",
                "since": self.down_since,
                "reason": reason,
                "connected": not never,
            }
            self._tell_state(told)
        self.down_reason = reason

    def past(self, limit_s: float, first_limit_s: float) -> bool:
        """Whether the link has been down longer than it may be (`first_limit_s` before it
        was ever up)."""
        if self.down_since is None or limit_s == 0:
            return False
        limit = limit_s if self.connection else min(limit_s, first_limit_s)
        return time.time() - self.down_since > limit

    def give_up(self, reason: str) -> None:
        """Every waiting request answered with why; what the editor sends next tries
        again."""
        if self.given_up:
            return
        self._move(Phase.GIVEN_UP)
        since = time.strftime("%H:%M:%S", time.localtime(self.down_since or time.time()))
        why = f"the link to {self.describe} is down since {since}: {reason}"
        self._log.warning("%s; waiting requests fail, the next one reconnects", why)
        for waiting in self.waiting.values():
            self._to_editor(jsonrpc.error(waiting.message["id"], LINK_DOWN, why))
        self.waiting.clear()
        self.held.clear()
        self._held_bytes = 0

    def _tell_state(self, state: dict[str, Any]) -> None:
        """The link's state, to an editor that asked for it (acpctl's terminal client)."""
        if self._wants_link_state():
            self._to_editor(jsonrpc.notification(acp.LINK_STATE, state))

    def _wants_link_state(self) -> bool:
        capabilities = (self._initialize or {}).get("clientCapabilities")
        meta = capabilities.get("_meta") if isinstance(capabilities, dict) else None
        return isinstance(meta, dict) and meta.get(acp.LINK_STATE_META) is True

    # -- from the editor ----------------------------------------------------------------

    def editor_sent(self, line: bytes) -> bool:
        """A line from the editor; whether the link, given up, should try again."""
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:  # the transports carry text: said here, as the
            # host would say it
            why = f"parse error: invalid UTF-8 at byte {exc.start}"
            self._to_editor(jsonrpc.error(None, acp.PARSE_ERROR, why))
            return False
        message = decoded(text)
        if message is None:  # not one JSON-RPC object: the host answers it
            self._send_or_hold(line)
            return False
        if "method" not in message and ("result" in message or "error" in message):
            self._editor_answered(message)
            return False
        if "id" not in message or not jsonrpc.is_id(message["id"]):
            self._send_or_hold(line, resend=True)
            return False
        method = message.get("method")  # not a string in a bad request: the host says so
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == acp.INITIALIZE:
            self._initialize = params
        elif method == acp.SESSION_PROMPT:
            own_prompt(self.sessions, params)
        key = jsonrpc.id_key(message["id"])
        waiting = self.waiting[key] = Waiting(message, line)
        if self.history is not None:
            self.history.request(message)
        wake = self.given_up
        if wake:  # the editor's request tries again
            self._move(Phase.DOWN)
        if self.live:
            waiting.connection = self.connection
            self._to_host(text)
        elif not self._hold(line):
            del self.waiting[key]
            why = f"the link to {self.describe} is down and {MAX_HELD} messages wait already"
            self._to_editor(jsonrpc.error(message["id"], LINK_DOWN, why))
        return wake

    def _editor_answered(self, message: dict[str, Any]) -> None:
        if self.history is not None:
            self.history.answered_agent(message)
        msg_id = message.get("id")
        ask = self._asks.get(jsonrpc.id_key(msg_id)) if jsonrpc.is_id(msg_id) else None
        if ask is None:
            self._log.debug("the editor answered %r, which the host no longer asks", msg_id)
            return
        answer = {**message, "id": ask.host_id}
        if self.live and ask.connection == self.connection:
            del self._asks[jsonrpc.id_key(msg_id)]
            self._to_host(json.dumps(answer), resend=True)
        else:  # sent once the host holds the request again
            ask.answer = answer

    def _send_or_hold(self, line: bytes, resend: bool = False) -> None:
        if self.live:
            self._to_host(line.decode("utf-8", "replace"), resend)
        elif not self._hold(line):
            self._log.warning("the link is down and the held messages are full: one dropped")

    def _hold(self, line: bytes) -> bool:
        if len(self.held) >= MAX_HELD or self._held_bytes + len(line) > MAX_HELD_BYTES:
            return False
        self.held.append(line)
        self._held_bytes += len(line)
        return True

    def _to_host(self, text: str, resend: bool = False) -> None:
        if not self.open:
            return  # the I/O sees the drop and reconnects
        if resend:
            self._resend.append(text)
        self.to_host.append(text)

    def _to_editor(self, message: Any) -> None:
        self.to_editor.append(jsonrpc.encode(message))

    def _send_held(self) -> None:
        held, self.held = self.held, collections.deque()
        self._held_bytes = 0
        for line in held:
            message = decoded(line)
            if message is not None and "method" in message and jsonrpc.is_id(message.get("id")):
                waiting = self.waiting.get(jsonrpc.id_key(message["id"]))
                if waiting is None:
                    continue  # answered while held (the outage limit)
                waiting.connection = self.connection
                self._to_host(line.decode("utf-8", "replace"))
            else:
                self._to_host(line.decode("utf-8", "replace"), resend=True)

    # -- after a drop -------------------------------------------------------------------

    def _resend_after_resume(self) -> None:
        """The same connection, resumed: what may have been lost in flight goes again, in
        the order it went first. Requests are run once there whatever comes twice; a
        repeated answer is dropped there."""
        requests = [
            w.line.decode("utf-8", "replace")
            for w in self.waiting.values()
            if w.connection == self.connection
        ]
        others = list(self._resend)
        self._resend.clear()
        for key, ask in list(self._asks.items()):
            if ask.answer is not None and ask.connection == self.connection:
                del self._asks[key]
                others.append(json.dumps(ask.answer))
        self.to_host.extend(requests)
        for text in others:
            self._to_host(text, resend=True)

    def _reopen(self) -> list[Reload]:
        """A new connection where the old one was lost: what sets it up as the editor had
        it. Requests that went out on the lost one fail, but for those that change nothing
        (SAFE_TO_REPEAT), which go again."""
        lost = [w for w in self.waiting.values() if w.connection is not None]
        again = [w for w in lost if w.message.get("method") in SAFE_TO_REPEAT]
        for waiting in reversed(again):  # first, before what was held, in their order
            waiting.connection = None
            self.held.appendleft(waiting.line)
            self._held_bytes += len(waiting.line)
        for waiting in lost:
            if waiting in again:
                continue
            del self.waiting[jsonrpc.id_key(waiting.message["id"])]
            self._to_editor(
                jsonrpc.error(
                    waiting.message["id"],
                    LINK_DOWN,
                    f"the link to {self.describe} dropped before the answer came, and the "
                    "host no longer held the connection: not sent again, since it may have "
                    "run there (a prompt's output is in the session's history)",
                )
            )
        self._resend.clear()
        if any(w.message.get("method") == acp.INITIALIZE for w in again):
            return []  # the editor's own initialize goes again; it had no session yet
        return reload_steps(self.sessions, self._initialize, self._capabilities.can("load"))

    def reloading(self, step: Reload) -> None:
        """`step`'s request goes out: its replay is deduplicated until `reloaded`."""
        reloading(step)

    def reloaded(self, step: Reload, answer: dict[str, Any] | None) -> None:
        reloaded(step, answer, self._log)

    # -- from the host ------------------------------------------------------------------

    def host_sent(self, text: str) -> str | None:
        """A message from the host; the cursor it carried, if any (a resume starts after
        it)."""
        message = decoded(text)
        if message is None:  # a batch's answers (or garbage): the editor's, as they came
            self.to_editor.append(text.encode() + b"\n")
            return None
        cursor = cursors_wire.cursor_of(message)
        as_sent = cursors_wire.line_without(text, cursor) if cursor is not None else text
        if as_sent is None or message.get("method") != acp.SESSION_UPDATE or "id" in message:
            message = cursors_wire.without(message)  # what the editor gets is encoded again
        method = message.get("method")
        if method == acp.HOST_STOPPING:  # the host's, not the agent's
            self._host_stopping(message)
        elif method is None:
            self._answered(message)
        elif "id" in message:
            self._asked(message)
        elif method == acp.CANCEL_REQUEST:
            self._cancelled(message)
        elif method == acp.RECORDED_NOTE and replay_under_way(self.sessions, message):
            pass  # the editor had the session's recorded answers before the link dropped
        elif method != acp.SESSION_UPDATE or not skip_replayed(self.sessions, message, as_sent):
            raw = as_sent.encode() if as_sent is not None else None  # the agent's own bytes
            if self.history is not None:
                self.history.update(message, raw or jsonrpc.encode(message)[:-1])
            self.to_editor.append(raw + b"\n" if raw is not None else jsonrpc.encode(message))
        return cursor

    def _host_stopping(self, message: dict[str, Any]) -> None:
        self.stopping = acp.stopping_notice(message.get("params"))
        self._log.warning("%s", self.stopping)
        if self._wants_link_state():  # acpctl's terminal client says it too
            self._to_editor(message)

    def _answered(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        if isinstance(msg_id, str) and self.own.resolve(msg_id, message) is not None:
            return
        key = jsonrpc.id_key(msg_id) if jsonrpc.is_id(msg_id) else None
        waiting = self.waiting.pop(key, None) if key is not None else None
        if waiting is None and unreadable(message):
            self._to_editor(message)  # the host's answer to a line the link could not read
            return
        if waiting is None:  # never asked, or answered already: the editor is not told twice
            self._log.warning(
                "dropped an answer from the host to no waiting request: id %r", msg_id
            )
            return
        self._note_answer(waiting, message)
        message = without_replayed(message)  # the link's own: not the editor's
        if self.history is not None:
            self.history.answer(waiting.message, message)
        self._to_editor(message)

    def _note_answer(self, waiting: Waiting, message: dict[str, Any]) -> None:
        method = waiting.message.get("method")
        params = waiting.message.get("params")
        params = params if isinstance(params, dict) else {}
        result = message.get("result")
        if not isinstance(result, dict):
            return
        if method == acp.INITIALIZE:
            self._capabilities = AgentCapabilities(result)
            self.resumable = advertises_resumable(result)
        elif opened_or_closed(self.sessions, str(method), params, result):
            self.on_sessions(list(self.sessions))

    def _asked(self, message: dict[str, Any]) -> None:
        fingerprint = ask_fingerprint(message)
        if fingerprint is not None:
            for key, ask in self._asks.items():
                if ask.fingerprint == fingerprint and ask.connection != self.connection:
                    # Asked again on the new connection: the editor holds it already.
                    ask.host_id, ask.connection = message["id"], self.connection
                    if ask.answer is not None:
                        del self._asks[key]
                        self._to_host(json.dumps({**ask.answer, "id": message["id"]}), True)
                    return
        editor_id = next(self._ask_ids)
        self._asks[jsonrpc.id_key(editor_id)] = Ask(
            editor_id, message["id"], self.connection, fingerprint
        )
        asked = {**message, "id": editor_id}
        if self.history is not None:
            self.history.asking(asked)
        self._to_editor(asked)

    def _cancelled(self, message: dict[str, Any]) -> None:
        """The host's `$/cancel_request`, to the editor under its id for the request."""
        params = message.get("params")
        if not isinstance(params, dict):
            return
        host_id = params.get("requestId")
        for key, ask in list(self._asks.items()):
            if ask.host_id == host_id and ask.connection == self.connection:
                del self._asks[key]
                self._to_editor({**message, "params": {**params, "requestId": ask.editor_id}})
                return
