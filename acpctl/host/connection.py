"""One client's logical connection to the host (ACP's `Acp-Connection-Id`), as a channel for
the server: what the client sends, from whichever transport carries it now, and what it is
sent, each message with a cursor (the resumable-delivery draft), kept so that a transport
that drops can be resumed without a message lost or doubled.

Streams: a WebSocket carries all of a connection's messages; Streamable HTTP splits them
into the connection-scoped stream and one stream per session (the SDKs' routing: a message
naming a session established on the connection goes to that session's stream; the answers
that establish one, and everything else, to the connection's). Cursors are one sequence per
connection, so each stream's are increasing.

The connection outlives its transports by GRACE_S, ends then, on DELETE, or when the host
stops. A request whose id the connection has seen already is not run again (a client's
retry after a drop): its answer comes once, on the stream."""

from __future__ import annotations

import asyncio
import collections
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from acpctl import __version__, cursors_wire, jsonrpc
from acpctl import protocol as acp
from acpctl.host.cursors import (
    ALL_STREAMS,
    RETENTION_ENTRIES,
    ResumeRefused,
    SentLog,
    cursor_of,
)
from acpctl.host.outbox import Backlog, Outbox, Reader
from acpctl.jsonrpc.channel import Recorded
from acpctl.jsonrpc.framing import BadLine, Batch, Message, parse_message
from acpctl.jsontext import decode_text, encode_text
from acpctl.store.lines import StoredAt
from acpctl.store.sessions import SessionStore

CONNECTION_ID_HEADER = "Acp-Connection-Id"
SESSION_ID_HEADER = "Acp-Session-Id"
CONNECTION_STREAM = ""  # the connection-scoped stream's key; a session's is its id
MAX_SESSIONS = 1024  # streams of sessions one connection may have


class TooManySessions(Exception):
    """A connection asked for more session streams than MAX_SESSIONS."""


GRACE_S = 60.0
# The answers that name a session for the first time on this connection.
ESTABLISHING = frozenset(
    {acp.SESSION_NEW, acp.SESSION_LOAD, acp.SESSION_RESUME, acp.SESSION_FORK, acp.SESSION_ATTACH}
)


# What one resume may give back: half of what a transport may be behind, the rest room for
# what goes on live meanwhile (past it the transport would be cut off again at once).
RESUME_MOST = Outbox.MAX_BEHIND // 2


class LogicalConnection:
    def __init__(
        self,
        connection_id: str | None = None,
        on_idle: Callable[[LogicalConnection], None] | None = None,
        store: SessionStore | None = None,
        grace_s: Callable[[], float] = lambda: GRACE_S,
        turn_running: Callable[[str], bool] = lambda session: False,
        role: str = acp.CONTROLLER,
        device: str | None = None,
    ) -> None:
        """`store`: the history the host records in, which holds what the connection
        need not keep itself (host/cursors.py). `grace_s`: how long it outlives its last
        transport, asked each time it goes idle."""
        self._grace_s = grace_s
        self._turn_running = turn_running  # in a session, whoever's turn it is
        self.id = connection_id or uuid.uuid4().hex
        self.role = role  # what its caller's token or device allows, said at initialize
        self.device = device  # the paired device it came from, said at initialize too
        self._inbox: asyncio.Queue[list[Message | BadLine] | None] = asyncio.Queue()
        self._sent = SentLog(store)
        self._store_identity = store.identity() if store is not None else None
        self._cursor = 0
        self._readers: list[Reader] = []
        self._delivered: dict[str | None, int] = {}  # stream -> last cursor a reader got
        self.sessions: set[str] = set()  # the sessions an answer established here
        # The sessions whose stream the client opened (Streamable HTTP): their messages go
        # there; any other session's go on the connection's stream, where a client that
        # opens no session stream (the Python SDK's, after a resume) still gets them.
        self.session_streams: set[str] = set()
        self._opening: set[str] = set()  # opened while a request naming it was under way
        self._routes: dict[tuple[bool, Any], str | None] = {}  # request -> session, method
        self._methods: dict[tuple[bool, Any], str] = {}
        self._seen: collections.OrderedDict[tuple[bool, Any], None] = collections.OrderedDict()
        self._captured: dict[tuple[bool, Any], asyncio.Future[str]] = {}
        # Running until a transport attaches: a client that initialized over HTTP and never
        # came back is not held for ever.
        self._grace: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            grace_s(), self._expire
        )
        self._on_idle = on_idle
        self.ended = False
        self.done = asyncio.Event()  # set once it has ended
        self.turn_requests: dict[str, Any] = {}  # session -> the prompt request running

    # -- from the client ----------------------------------------------------------

    def deliver(self, data: bytes) -> bool:
        """A message from the client; False when it repeats a request already taken."""
        item = parse_message(data)
        if not isinstance(item, BadLine):
            for message in item[0] if isinstance(item[0], list) else [item[0]]:
                if not self._note(message):
                    return False
        self._inbox.put_nowait([item])
        return True

    def _note(self, message: Any) -> bool:
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return True  # a response or a notification: nothing to answer once
        msg_id = message["id"]
        if not jsonrpc.is_id(msg_id):
            return True
        key = jsonrpc.id_key(msg_id)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > RETENTION_ENTRIES:
            self._seen.popitem(last=False)
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        self._routes[key] = session if isinstance(session, str) else None
        self._methods[key] = str(message["method"])
        if message["method"] == acp.SESSION_PROMPT and isinstance(session, str):
            self.turn_requests[session] = msg_id
        return True

    def capture(self, msg_id: Any) -> asyncio.Future[str]:
        """The answer to `msg_id`, handed here instead of to a stream (initialize over
        HTTP is answered in its POST's body)."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._captured[jsonrpc.id_key(msg_id)] = future
        return future

    # -- the channel the server writes to ---------------------------------------------

    def send(self, message: Any) -> None:
        self._out(message)

    def write(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    self._out(_decoded(line), line)
                except ValueError:  # the server writes only what it encoded or checked
                    continue

    def relay(self, line: bytes, message: Any, recorded: Recorded | None = None) -> None:
        at = recorded.stored_last() if recorded is not None and self._sent.reads_back else None
        self._out(message, line.rstrip(b"\n"), at)

    def _out(self, message: Any, line: bytes | None = None, at: StoredAt | None = None) -> None:
        if self.ended:
            return
        stream = CONNECTION_STREAM
        if isinstance(message, dict):
            if "method" not in message:
                msg_id = message.get("id")
                key = jsonrpc.id_key(msg_id) if jsonrpc.is_id(msg_id) else None
                if key is not None and self._methods.get(key) == acp.INITIALIZE:
                    message = _resumable(message, self._store_identity, self)
                if key is not None and key in self._captured:
                    self._methods.pop(key, None)
                    self._routes.pop(key, None)
                    self._captured.pop(key).set_result(encode_text(message))
                    return
                stream = self._stream_of_answer(key, message)
            else:
                params = message.get("params")
                session = params.get("sessionId") if isinstance(params, dict) else None
                if isinstance(session, str) and session in self.session_streams:
                    stream = session
        self._cursor += 1
        cursor = str(self._cursor)
        inserted = cursors_wire.line_with(message, line, cursor) if line is not None else None
        text = inserted if inserted is not None else cursors_wire.encoded_with(message, cursor)
        self._sent.add(self._cursor, stream, text, at, inserted is not None)
        for reader in self._readers:
            if reader.stream is ALL_STREAMS or reader.stream == stream:
                reader.push(self._cursor, text)
                self._delivered[reader.stream] = self._cursor

    def opened(self, session: str) -> None:
        """The client opens a session's stream (before it sends a message naming the
        session, as the TypeScript SDK's client and acpctl's link do, or once it has seen
        one, as the Python SDK's does): the session's messages go to it from now on.
        Unless a request naming the session is under way: its replay and its answer keep
        to the stream they began on, and the session's stream takes over after the
        answer."""
        if session in self.session_streams:
            return
        if len(self.session_streams) + len(self._opening) >= MAX_SESSIONS:
            raise TooManySessions(f"at most {MAX_SESSIONS} session streams on one connection")
        if session in self._routes.values():
            self._opening.add(session)
        else:
            self.session_streams.add(session)

    def _stream_of_answer(self, key: tuple[bool, Any] | None, message: dict[str, Any]) -> str:
        if key is None:
            return CONNECTION_STREAM
        session = self._routes.pop(key, None)
        method = self._methods.pop(key, None)
        if session is not None and self.turn_requests.get(session) == message.get("id"):
            del self.turn_requests[session]
        result = message.get("result")
        if method in ESTABLISHING and isinstance(result, dict):
            # The answer goes where the session's messages went: after a load's replay,
            # on the same stream (a client reads its streams in no one order).
            established = result.get("sessionId", session)
            stream = established if established in self.session_streams else CONNECTION_STREAM
            if isinstance(established, str):
                self.sessions.add(established)
                if established in self._opening:
                    self._opening.discard(established)
                    self.session_streams.add(established)
            return stream
        if session is not None and session in self.session_streams:
            return session
        return CONNECTION_STREAM

    async def drain(self) -> None:
        for reader in list(self._readers):
            await reader.drain()

    def incoming(self) -> AsyncIterator[Batch]:
        return self._read()

    async def _read(self) -> AsyncIterator[Batch]:
        while True:
            batch = await self._inbox.get()
            if batch is None:
                return
            yield batch

    def close(self) -> None:
        """The host is done with it: what is logged stays readable to transports that
        are attached, nothing more comes."""
        self.end()

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self.done.set()
        if self._grace is not None:
            self._grace.cancel()
        self._inbox.put_nowait(None)
        for future in self._captured.values():
            future.cancel()

    # -- transports ---------------------------------------------------------------

    def backlog(self, stream: str | None, after: str | None) -> Backlog:
        """What a reader of `stream` gets first: what followed the cursor `after` (without
        one, what no reader of the stream has had yet). ResumeRefused for a cursor the
        connection never issued there, or no longer holds what follows."""
        if after is None:
            start = self._delivered.get(stream, 0)
        else:
            start = cursor_of(after)
            oldest = self._sent.oldest(self._cursor + 1)
            # "0": the client has had nothing yet, and all there was is still held.
            from_the_start = start == 0 and oldest == 1
            if (
                not from_the_start
                and not (start == oldest - 1 == self._cursor)
                and not self._sent.issued(start, stream)
            ):
                raise ResumeRefused(f"cursor {after} is not held for this connection")
        return Backlog(self._sent.after(start, stream, RESUME_MOST), self._cursor)

    def attach(self, reader: Reader, backlog: Backlog) -> None:
        """`reader` reads its stream from now on: first `backlog`, and what was sent since
        it was taken."""
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        since = self._sent.after(backlog.through, reader.stream, RESUME_MOST)
        missed = [*backlog.messages, *since]
        for cursor, text in missed:
            reader.push(cursor, text)
            self._delivered[reader.stream] = cursor
        self._readers.append(reader)

    def detach(self, reader: Reader) -> None:
        if reader in self._readers:
            self._readers.remove(reader)
        if not self._readers and not self.ended:
            self._grace = asyncio.get_running_loop().call_later(self._grace_s(), self._expire)

    @property
    def idle(self) -> bool:
        """No transport carries it now (its client may come back within the grace)."""
        return not self._readers

    def _expire(self) -> None:
        self._grace = None
        if not self._readers:
            self.end()
            if self._on_idle is not None:
                self._on_idle(self)

    def turn_state(self) -> dict[str, Any]:
        """`_meta["acp/turnState"]` for a resume (the draft's v1 form): running with this
        client's prompt, or running with another client's in one of its sessions."""
        if self.turn_requests:
            session, request = next(iter(self.turn_requests.items()))
            return {"state": "running", "promptRequestId": request, "sessionId": session}
        others = next((s for s in sorted(self.sessions) if self._turn_running(s)), None)
        if others is not None:
            return {"state": "running", "sessionId": others}
        return {"state": "idle"}


def resume(
    request: dict[str, Any],
    find: Callable[[str], LogicalConnection | None],
    reader: Reader,
    connection_id: str | None = None,
) -> LogicalConnection:
    """A `stream/resume` request served: the connection it names found, its answer (with
    the turn's state) pushed to `reader`, then what followed the cursor, then what is live.
    Raises ResumeRefused (nothing pushed) when that cannot be done: the transport tells
    the client with `resume_failed` and closes."""
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    wanted = params.get("connectionId", connection_id)
    cursor = params.get("cursor")
    connection = find(wanted) if isinstance(wanted, str) else None
    if connection is None or connection.ended:
        raise ResumeRefused(f"connection {wanted} is not held by this host")
    if not isinstance(cursor, str):
        raise ResumeRefused(
            "stream/resume needs params.cursor: the last acp/cursor the client holds"
        )
    backlog = connection.backlog(reader.stream, cursor)
    if jsonrpc.is_id(request.get("id")):
        answer = {"_meta": {acp.TURN_STATE_META: connection.turn_state()}, "connectionId": wanted}
        reader.push(0, encode_text(jsonrpc.result(request["id"], answer)))
    connection.attach(reader, backlog)
    return connection


def resume_failed(request: dict[str, Any], reason: str) -> list[str]:
    """What a refused `stream/resume` is told: the draft's notification, and an error answer
    to the request."""
    failed = [jsonrpc.notification(acp.STREAM_RESUME_FAILED, {"reason": reason})]
    if jsonrpc.is_id(request.get("id")):
        failed.append(jsonrpc.error(request["id"], jsonrpc.INVALID_REQUEST, reason))
    return [json.dumps(message) for message in failed]


def resume_request(text: str | bytes) -> dict[str, Any] | None:
    """`text` as a `stream/resume` request; None when it is anything else."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict) and message.get("method") == acp.STREAM_RESUME:
        return message
    return None


_last_line: list[tuple[bytes, Any]] = []


def _decoded(line: bytes) -> Any:
    """`line` decoded. A session's update goes to each of its clients as the same line, one
    client after the other: it is decoded once for all of them (never changed: each
    connection copies what it adds its cursor to)."""
    if _last_line and _last_line[0][0] == line:
        return _last_line[0][1]
    value = decode_text(line)
    _last_line[:] = [(line, value)]
    return value


def _resumable(
    answer: dict[str, Any], store: str | None, connection: LogicalConnection
) -> dict[str, Any]:
    """The initialize answer with what the resumable-delivery draft has servers advertise,
    and which acpctl serves it, with which store, on which connection, for whom: all of it
    in `_meta` of a v1 answer (v1 has no top-level field for it), the advertisement in
    `capabilities.transport` of a v2 one."""
    result = answer.get("result")
    if not isinstance(result, dict):
        return answer
    transport = {"resumable": {"retentionMessages": RETENTION_ENTRIES, "retentionSeconds": GRACE_S}}
    # Which acpctl serves it (a remote client's doctor reports it), and its store (a link
    # from this machine records nothing twice).
    ours: dict[str, Any] = {
        acp.HOST_VERSION_META: __version__,
        acp.HOST_STORE_META: store,
        acp.CONNECTION_ID_META: connection.id,
        acp.ROLE_META: connection.role,
    }
    if connection.device is not None:
        ours[acp.DEVICE_META] = connection.device
    added: dict[str, Any] = {}
    if result.get("protocolVersion") == 2:
        capabilities = result.get("capabilities")
        capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        added["capabilities"] = {**capabilities, "transport": transport}
    else:
        ours[acp.TRANSPORT_META] = transport
    meta = result.get("_meta")
    meta = {**meta, **ours} if isinstance(meta, dict) else ours
    return {**answer, "result": {**result, **added, "_meta": meta}}
