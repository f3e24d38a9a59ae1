"""The link: `run --acp` for a remote agent. The editor speaks stdio to it, as to any agent;
it keeps one logical connection to the remote (remote/transports.py) and hides every drop.

- A dropped transport is reopened with jittered backoff, resuming the connection by its last
  cursor. The requests still unanswered are sent again: acpctl serve runs a request id it
  has seen once only, so nothing runs twice; what the editor answered or notified on the
  dropped transport is sent again too (a repeated answer is dropped there).
- When the remote no longer holds the connection, a new one is opened: the editor's
  initialize again, then each open session loaded again with its replay deduplicated
  against what the editor has seen. A request that went out on the lost connection may
  have run there, so it is never sent again: the editor gets an error for it. A
  permission request the remote asks again (it does, of a client that joins) is matched to
  the one the editor holds, so the editor's one answer reaches it.
- While down, the editor's messages are held (within MAX_HELD). Past the outage limit every
  waiting request fails with an error that says since when the link is down and why; the
  next message from the editor tries again.

What the remote sends reaches the editor unchanged but for the transport's
`_meta["acp/cursor"]`, and the ids of the remote's requests (numbered here: a new
connection numbers its own from the start again)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from acpctl import cursors_wire, jsonrpc
from acpctl import protocol as acp
from acpctl.capabilities import AgentCapabilities
from acpctl.jsonrpc.framing import read_lines
from acpctl.jsonrpc.streams import Output
from acpctl.jsontext import encode_text
from acpctl.remote.transports import (
    LinkDown,
    LinkRefused,
    NoSuchHost,
    ResumePoint,
    ResumeRefused,
    Transport,
    decoded,
)


class History(Protocol):
    """What the link tells the history of this machine (runner/remote_history.py)."""

    def request(self, message: dict[str, Any]) -> None: ...
    def answered_agent(self, answer: dict[str, Any]) -> None: ...
    def answer(self, request: dict[str, Any], answer: dict[str, Any]) -> None: ...
    def update(self, message: dict[str, Any], raw: bytes) -> None: ...
    def asking(self, message: dict[str, Any]) -> None: ...


LINK_DOWN = -32010  # acpctl's error code: the remote agent cannot be reached
FIRST_CONNECT_LIMIT_S = 20.0  # before the link was ever up, the editor is not kept waiting
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
MAX_HELD = 1000  # messages from the editor held while the link is down
MAX_HELD_BYTES = 16 << 20
MAX_RESENT = 10_000  # answers and notifications kept to send again after a resume
REOPEN_TIMEOUT_S = 60.0
ESTABLISHING = frozenset({acp.SESSION_NEW, acp.SESSION_LOAD, acp.SESSION_RESUME, acp.SESSION_FORK})
# Requests that change nothing at the remote: sent again on a new connection when the one
# they went out on was lost before their answer.
SAFE_TO_REPEAT = frozenset({acp.INITIALIZE, acp.SESSION_LIST})

Dial = Callable[[ResumePoint | None], Awaitable[Transport]]


@dataclass
class Waiting:
    """An editor's request not answered yet."""

    message: dict[str, Any]
    line: bytes
    connection: int | None = None  # the logical connection it went out on; None: held


@dataclass
class Ask:
    """A request of the remote's, as the editor holds it."""

    editor_id: int
    remote_id: Any
    connection: int
    fingerprint: tuple[Any, ...] | None
    answer: dict[str, Any] | None = None  # the editor's, until a transport takes it


@dataclass
class OpenSession:
    """A session the editor has open: how it opened it, and what updates of it it has."""

    params: dict[str, Any]
    seen: collections.Counter[int] = field(default_factory=collections.Counter)
    replaying: collections.Counter[int] | None = None  # while reloading: what to skip


class Link:
    def __init__(
        self,
        describe: str,
        dial: Dial,
        output: Output,
        log: logging.Logger,
        outage_limit_s: float,
    ) -> None:
        self.describe = describe  # where the remote is, for the log and errors
        self._dial = dial
        self._output = output
        self._log = log
        self._limit = outage_limit_s
        self._transport: Transport | None = None
        self._carrying: asyncio.Future[None] | None = None  # reading the transport
        self._live = False  # the transport takes the editor's messages
        self._connection = 0  # logical connections opened so far
        self._resume_from: ResumePoint | None = None
        self._waiting: dict[tuple[bool, Any], Waiting] = {}
        self._held: collections.deque[bytes] = collections.deque()
        self._held_bytes = 0
        self._resend: collections.deque[str] = collections.deque(maxlen=MAX_RESENT)
        self._asks: dict[tuple[bool, Any], Ask] = {}  # by the id the editor sees
        self._ask_ids = itertools.count(1)
        self._internal: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._internal_ids = itertools.count(1)
        self._initialize: dict[str, Any] | None = None  # the editor's params
        self._capabilities = AgentCapabilities()  # the agent's, from initialize
        # Whether the remote resumes a dropped connection: it says so at initialize (the
        # resumable-delivery draft). One that does not (the SDKs' servers) gets a new one.
        self._resumable = False
        self.sessions: dict[str, OpenSession] = {}
        self._down_since: float | None = None  # time.time() when the link went down
        self._down_reason = ""
        self._given_up = False
        self._wake = asyncio.Event()  # the editor sent something
        self._editor_done = asyncio.Event()
        # Told the open sessions' ids whenever they change (the run record, `acpctl ps`).
        self.on_sessions: Callable[[list[str]], None] = lambda ids: None
        self.history: History | None = None  # this machine's record of what is relayed

    # -- running ----------------------------------------------------------------------

    async def run(self, editor: asyncio.StreamReader) -> int:
        reading = asyncio.ensure_future(self._read_editor(editor))
        try:
            while not self._editor_done.is_set():
                transport = await self._connect()
                if transport is None:  # given up: until the editor sends something
                    await _first_of(self._wake.wait(), self._editor_done.wait())
                    self._wake.clear()
                    continue
                await self._carry(transport)
        finally:
            reading.cancel()
            if self._transport is not None:
                await self._transport.close(leaving=True)
            await self._output.drain()
        return 0

    async def _read_editor(self, editor: asyncio.StreamReader) -> None:
        try:
            async for lines in read_lines(editor):
                for line in lines:
                    if line is not None and line.strip():
                        await self._from_editor(line)
                await self._output.drain()
        finally:
            self._editor_done.set()
            self._wake.set()

    async def _connect(self) -> Transport | None:
        """A transport, live; None when the link is given up (the outage limit passed, or
        the remote refused in a way no retry cures)."""
        attempt = 0
        while not self._editor_done.is_set():
            try:
                transport = await self._dial(self._resume_from)
            except ResumeRefused as exc:
                self._log.info("the remote could not resume the connection (%s): a new one", exc)
                self._resume_from = None
                continue
            except (LinkRefused, NoSuchHost) as exc:
                self._went_down(str(exc))
                if isinstance(exc, LinkRefused) or not self._connection:
                    self._give_up(str(exc))
                    return None
            except (LinkDown, OSError, asyncio.TimeoutError) as exc:
                self._went_down(str(exc) or type(exc).__name__)
            else:
                if await self._came_up(transport):
                    return transport
                continue
            if self._past_limit():
                self._give_up(self._down_reason)
                return None
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**attempt) * random.uniform(0.5, 1.5)
            attempt += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._editor_done.wait(), delay)
        return None

    def _past_limit(self) -> bool:
        if self._down_since is None or self._limit == 0:
            return False
        limit = self._limit if self._connection else min(self._limit, FIRST_CONNECT_LIMIT_S)
        return time.time() - self._down_since > limit

    async def _came_up(self, transport: Transport) -> bool:
        """Make `transport` the link's; False when it dropped while a new connection was
        being set up (the caller dials again)."""
        self._transport = transport
        resumed = transport.resumed
        previous = self._connection
        if not resumed:
            self._connection += 1
        carrying = asyncio.ensure_future(self._read(transport))
        try:
            if resumed:
                await self._resend_after_resume()
            elif previous:
                await self._reopen(transport, carrying)
        except (LinkDown, asyncio.TimeoutError, ConnectionError) as exc:
            self._log.info("the link dropped again while reconnecting: %s", exc)
            carrying.cancel()
            await transport.close(leaving=False)
            # A connection set up halfway is not resumed: the next one is set up whole.
            self._resume_from = transport.resume_point() if resumed else None
            self._transport = None
            return False
        self._carrying = carrying
        self._live = True
        if self._down_since is not None:
            took = time.time() - self._down_since
            how = (
                "resumed"
                if resumed
                else f"a new connection, {len(self.sessions)} session(s) reloaded"
            )
            self._log.info("the link to %s is back after %.1f s (%s)", self.describe, took, how)
            self._tell_state({"state": "up", "after": round(took, 1), "how": how})
        self._down_since = None
        self._given_up = False
        await self._send_held()
        return True

    async def _carry(self, transport: Transport) -> None:
        """Until the transport drops or the editor goes."""
        assert self._carrying is not None
        await _first_of(asyncio.shield(self._carrying), self._editor_done.wait())
        if self._editor_done.is_set():
            return
        self._live = False
        self._transport = None
        self._resume_from = transport.resume_point() if self._resumable else None
        reason = transport.close_reason
        await transport.close(leaving=not self._resumable)
        self._went_down(reason)

    def _went_down(self, reason: str) -> None:
        if self._down_since is None:
            self._down_since = time.time()
            self._log.warning("the link to %s dropped: %s; reconnecting", self.describe, reason)
            self._tell_state({"state": "down", "since": self._down_since, "reason": reason})
        self._down_reason = reason

    def _tell_state(self, state: dict[str, Any]) -> None:
        """The link's state, to an editor that asked for it (acpctl's terminal client)."""
        capabilities = (self._initialize or {}).get("clientCapabilities")
        meta = capabilities.get("_meta") if isinstance(capabilities, dict) else None
        if isinstance(meta, dict) and meta.get(acp.LINK_STATE_META) is True:
            self._output.send(jsonrpc.notification(acp.LINK_STATE, state))

    def _give_up(self, reason: str) -> None:
        """Every waiting request answered with why; what the editor sends next tries
        again."""
        if self._given_up:
            return
        self._given_up = True
        since = time.strftime("%H:%M:%S", time.localtime(self._down_since or time.time()))
        why = f"the link to {self.describe} is down since {since}: {reason}"
        self._log.warning("%s; waiting requests fail, the next one reconnects", why)
        for waiting in self._waiting.values():
            self._output.send(jsonrpc.error(waiting.message["id"], LINK_DOWN, why))
        self._waiting.clear()
        self._held.clear()
        self._held_bytes = 0

    # -- from the editor ----------------------------------------------------------------

    async def _from_editor(self, line: bytes) -> None:
        message = decoded(line)
        if message is None:  # not one JSON-RPC object: the remote answers it
            await self._send_or_hold(line)
            return
        if "method" not in message:
            await self._editor_answered(message)
            return
        if "id" not in message or not jsonrpc.is_id(message["id"]):
            await self._send_or_hold(line, resend=True)
            return
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == acp.INITIALIZE:
            self._initialize = params
        elif method == acp.SESSION_PROMPT:
            self._own_prompt(params)
        waiting = Waiting(message, line)
        self._waiting[jsonrpc.id_key(message["id"])] = waiting
        if self.history is not None:
            self.history.request(message)
        if self._given_up:
            self._given_up = False
            self._wake.set()
        if self._live and self._transport is not None:
            waiting.connection = self._connection
            await self._send(line.decode("utf-8", "replace"))
        elif not self._hold(line):
            del self._waiting[jsonrpc.id_key(message["id"])]
            self._output.send(
                jsonrpc.error(
                    message["id"],
                    LINK_DOWN,
                    f"the link to {self.describe} is down and {MAX_HELD} messages wait already",
                )
            )

    async def _editor_answered(self, message: dict[str, Any]) -> None:
        if self.history is not None:
            self.history.answered_agent(message)
        msg_id = message.get("id")
        ask = self._asks.get(jsonrpc.id_key(msg_id)) if jsonrpc.is_id(msg_id) else None
        if ask is None:
            self._log.debug("the editor answered %r, which the remote no longer asks", msg_id)
            return
        answer = {**message, "id": ask.remote_id}
        if self._live and ask.connection == self._connection:
            del self._asks[jsonrpc.id_key(msg_id)]
            await self._send(json.dumps(answer), resend=True)
        else:  # sent once the remote holds the request again
            ask.answer = answer

    async def _send_or_hold(self, line: bytes, resend: bool = False) -> None:
        if self._live and self._transport is not None:
            await self._send(line.decode("utf-8", "replace"), resend)
        elif not self._hold(line):
            self._log.warning("the link is down and the held messages are full: one dropped")

    def _hold(self, line: bytes) -> bool:
        if len(self._held) >= MAX_HELD or self._held_bytes + len(line) > MAX_HELD_BYTES:
            return False
        self._held.append(line)
        self._held_bytes += len(line)
        return True

    async def _send(self, text: str, resend: bool = False) -> None:
        if self._transport is None:
            return
        if resend:
            self._resend.append(text)
        with contextlib.suppress(LinkDown):  # the reader sees the drop and reconnects
            await self._transport.send(text)

    async def _send_held(self) -> None:
        held, self._held = self._held, collections.deque()
        self._held_bytes = 0
        for line in held:
            message = decoded(line)
            if message is not None and "method" in message and jsonrpc.is_id(message.get("id")):
                waiting = self._waiting.get(jsonrpc.id_key(message["id"]))
                if waiting is None:
                    continue  # answered while held (the outage limit)
                waiting.connection = self._connection
                await self._send(line.decode("utf-8", "replace"))
            else:
                await self._send(line.decode("utf-8", "replace"), resend=True)

    def _own_prompt(self, params: dict[str, Any]) -> None:
        """The prompt's text comes back in a reload's replay as user_message_chunk updates,
        which the editor never got live: counted as seen."""
        session = self.sessions.get(str(params.get("sessionId")))
        blocks = params.get("prompt")
        if session is None or not isinstance(blocks, list):
            return
        for block in blocks:
            update = {"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": block}
            # As acpctl serve replays a prompt it recorded: encoded by acpctl, whose text
            # the cursor leaves as it was.
            replayed = {"sessionId": params["sessionId"], "update": update}
            try:
                text = encode_text(jsonrpc.notification(acp.SESSION_UPDATE, replayed))
            except ValueError:
                continue
            session.seen[hash(text)] += 1

    # -- after a drop -------------------------------------------------------------------

    async def _resend_after_resume(self) -> None:
        """The same connection, resumed: what may have been lost in flight goes again, in
        the order it went first. Requests are run once there whatever comes twice; a
        repeated answer is dropped there."""
        requests = [
            w.line.decode("utf-8", "replace")
            for w in self._waiting.values()
            if w.connection == self._connection
        ]
        others = list(self._resend)
        self._resend.clear()
        for key, ask in list(self._asks.items()):
            if ask.answer is not None and ask.connection == self._connection:
                del self._asks[key]
                others.append(json.dumps(ask.answer))
        for text in requests:
            await self._send(text)
        for text in others:
            await self._send(text, resend=True)

    async def _reopen(self, transport: Transport, carrying: asyncio.Future[None]) -> None:
        """A new connection where the old one was lost: initialized as the editor did,
        its sessions loaded again. Requests that went out on the lost one fail, but for
        those that change nothing (SAFE_TO_REPEAT), which go again."""
        lost = [w for w in self._waiting.values() if w.connection is not None]
        again = [w for w in lost if w.message["method"] in SAFE_TO_REPEAT]
        for waiting in reversed(again):  # first, before what was held, in their order
            waiting.connection = None
            self._held.appendleft(waiting.line)
            self._held_bytes += len(waiting.line)
        for waiting in lost:
            if waiting in again:
                continue
            del self._waiting[jsonrpc.id_key(waiting.message["id"])]
            self._output.send(
                jsonrpc.error(
                    waiting.message["id"],
                    LINK_DOWN,
                    f"the link to {self.describe} dropped before the answer came, and the "
                    "remote no longer held the connection: not sent again, since it may have "
                    "run there (a prompt's output is in the session's history)",
                )
            )
        self._resend.clear()
        if any(w.message["method"] == acp.INITIALIZE for w in again):
            return  # the editor's own initialize goes again; it had no session yet
        if self._initialize is not None:
            await self._ask(acp.INITIALIZE, self._initialize, carrying)
        can_load = self._capabilities.can("load")
        for session_id, session in list(self.sessions.items()):
            params = {
                "sessionId": session_id,
                "cwd": session.params.get("cwd", "/"),
                "mcpServers": session.params.get("mcpServers", []),
                # acpctl serve replays it as recorded, update for update, so that what the
                # editor has can be left out; other servers ignore it.
                "_meta": {acp.REPLAY_META: acp.REPLAY_AS_RECORDED},
            }
            if can_load:
                session.replaying = collections.Counter(session.seen)
                try:
                    await self._ask(acp.SESSION_LOAD, params, carrying)
                finally:
                    session.replaying = None
            else:
                await self._ask(acp.SESSION_RESUME, params, carrying)

    async def _ask(
        self, method: str, params: dict[str, Any], carrying: asyncio.Future[None]
    ) -> dict[str, Any]:
        msg_id = f"acpctl-link-{next(self._internal_ids)}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._internal[msg_id] = answer
        transport = self._transport
        assert transport is not None
        try:
            await transport.send(json.dumps(jsonrpc.request(msg_id, method, params)))
            await asyncio.wait_for(
                _first_of(asyncio.shield(answer), asyncio.shield(carrying)), REOPEN_TIMEOUT_S
            )
            if not answer.done():
                raise LinkDown("dropped")
            result = answer.result()
        finally:
            self._internal.pop(msg_id, None)
        if "error" in result:
            self._log.warning("%s on reconnect failed: %s", method, result["error"])
        return result

    # -- from the remote ----------------------------------------------------------------

    async def _read(self, transport: Transport) -> None:
        while (text := await transport.receive()) is not None:
            await self._from_remote(text, transport)
            await self._output.room()

    async def _from_remote(self, text: str, transport: Transport) -> None:
        message = decoded(text)
        if message is None:
            self._log.debug("the remote sent a line that is not a JSON-RPC object")
            return
        cursor = cursors_wire.cursor_of(message)
        if cursor is not None:
            transport.took(cursor)
        as_sent = cursors_wire.line_without(text, cursor) if cursor is not None else text
        if as_sent is None or message.get("method") != acp.SESSION_UPDATE or "id" in message:
            message = cursors_wire.without(message)  # what the editor gets is encoded again
        if message.get("method") == acp.HOST_STOPPING:  # the remote host's, not the agent's
            self._log.warning("remote: %s", acp.stopping_notice(message.get("params")))
            return
        if "method" not in message:
            self._answered(message)
        elif "id" in message:
            await self._asked(message)
        else:
            if message["method"] == acp.SESSION_UPDATE and self._skip_replayed(message, as_sent):
                return
            if message["method"] == acp.CANCEL_REQUEST:
                cancelled = self._cancelled(message)
                if cancelled is not None:
                    self._output.send(cancelled)
                return
            raw = as_sent.encode() if as_sent is not None else None  # the agent's own bytes
            if self.history is not None:
                self.history.update(message, raw or jsonrpc.encode(message)[:-1])
            if raw is not None:
                self._output.write(raw + b"\n")
            else:
                self._output.send(message)

    def _answered(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        key = jsonrpc.id_key(msg_id) if jsonrpc.is_id(msg_id) else None
        if isinstance(msg_id, str) and msg_id in self._internal:
            self._internal[msg_id].set_result(message)
            return
        waiting = self._waiting.pop(key, None) if key is not None else None
        if waiting is None:  # never asked, or answered already: the editor is not told twice
            self._log.warning(
                "dropped an answer from the remote to no waiting request: id %r", msg_id
            )
            return
        self._note_answer(waiting, message)
        if self.history is not None:
            self.history.answer(waiting.message, message)
        self._output.send(message)

    def _note_answer(self, waiting: Waiting, message: dict[str, Any]) -> None:
        method = waiting.message["method"]
        params = waiting.message.get("params")
        params = params if isinstance(params, dict) else {}
        result = message.get("result")
        if not isinstance(result, dict):
            return
        if method == acp.INITIALIZE:
            self._capabilities = AgentCapabilities(result)
            transport = result.get("capabilities")
            self._resumable = (
                isinstance(transport, dict)
                and isinstance(transport.get("transport"), dict)
                and "resumable" in transport["transport"]
            )
        elif method in ESTABLISHING:
            session_id = result.get("sessionId", params.get("sessionId"))
            if isinstance(session_id, str) and session_id not in self.sessions:
                self.sessions[session_id] = OpenSession(params)
                self.on_sessions(list(self.sessions))
        elif (
            method == acp.SESSION_CLOSE
            and self.sessions.pop(str(params.get("sessionId")), None) is not None
        ):
            self.on_sessions(list(self.sessions))

    async def _asked(self, message: dict[str, Any]) -> None:
        fingerprint = _ask_fingerprint(message)
        if fingerprint is not None:
            for key, ask in self._asks.items():
                if ask.fingerprint == fingerprint and ask.connection != self._connection:
                    # Asked again on the new connection: the editor holds it already.
                    ask.remote_id, ask.connection = message["id"], self._connection
                    if ask.answer is not None:
                        del self._asks[key]
                        answer = {**ask.answer, "id": message["id"]}
                        await self._send(json.dumps(answer), resend=True)
                    return
        editor_id = next(self._ask_ids)
        self._asks[jsonrpc.id_key(editor_id)] = Ask(
            editor_id, message["id"], self._connection, fingerprint
        )
        asked = {**message, "id": editor_id}
        if self.history is not None:
            self.history.asking(asked)
        self._output.send(asked)

    def _cancelled(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The remote's `$/cancel_request`, naming the editor's id for its request."""
        params = message.get("params")
        if not isinstance(params, dict):
            return None
        remote_id = params.get("requestId")
        for key, ask in list(self._asks.items()):
            if ask.remote_id == remote_id and ask.connection == self._connection:
                del self._asks[key]
                return {**message, "params": {**params, "requestId": ask.editor_id}}
        return None

    def _skip_replayed(self, message: dict[str, Any], text: str | None) -> bool:
        params = message.get("params")
        if not isinstance(params, dict):
            return False
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            return False
        mark = hash(text) if text is not None else _fingerprint(params.get("update"))
        if session.replaying is not None and session.replaying[mark] > 0:
            session.replaying[mark] -= 1
            return True
        seen = session.seen
        seen[mark] = seen.get(mark, 0) + 1  # not Counter's __missing__, a Python call
        return False


def _fingerprint(update: Any) -> int:
    """What tells one update from another when its text was encoded again (a slow path on
    both sides, live and in the replay alike): its JSON, keys in the order they came (the
    store keeps the agent's order). Otherwise the text itself, as the agent wrote it, tells
    (acpctl serve replays a recorded agent line as its own bytes)."""
    try:
        return hash(encode_text(update))
    except ValueError:
        return 0


def _ask_fingerprint(message: dict[str, Any]) -> tuple[Any, ...] | None:
    """What identifies a permission request across connections: its session and tool
    call. Other requests of the remote's are not asked again."""
    if message.get("method") != acp.REQUEST_PERMISSION:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    tool = params.get("toolCall")
    tool_id = tool.get("toolCallId") if isinstance(tool, dict) else None
    return (params.get("sessionId"), tool_id)


async def _first_of(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
