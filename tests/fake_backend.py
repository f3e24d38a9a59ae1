"""An in-process backend for the server's own tests: a scripted ACP agent behind the
`Backend` interface, and an output that keeps what the server sends the editor.

The server runs in the test's event loop, so routing, id mapping, recording, batches and
the attach fallbacks are tested without a subprocess."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.config import SILENCE_WARNING_S
from acpctl.jsonrpc import JsonObject, ResponseHook, RpcError
from acpctl.jsonrpc.channel import MemoryChannel, memory_pair
from acpctl.jsonrpc.pending import PendingRequests
from acpctl.runner.backends import AgentEvents
from acpctl.runner.clients import Client
from acpctl.runner.context import Connection
from acpctl.runner.handshake import Handshake
from acpctl.runner.recorder import Recorder
from acpctl.runner.server import AcpServer
from acpctl.store.sessions import SessionStore

Handler = Callable[[JsonObject], Awaitable[Any]]


class FakeAgent:
    """An agent as the server sees it. Each method answers with `handlers[method]` (a
    coroutine taking params, returning the result or raising RpcError); what it sends the
    server (updates, its own requests) goes through `events`."""

    def __init__(self, capabilities: JsonObject | None = None) -> None:
        self.events: AgentEvents | None = None
        self.generation = 0
        self.alive = False
        self.handshake: Handshake | None = None
        self.capabilities = (
            {"sessionCapabilities": {"resume": {}}} if capabilities is None else capabilities
        )
        self.calls: list[tuple[str, Any]] = []  # what the server sent, in order
        self.tasks: set[asyncio.Future[None]] = set()
        self.notifications: list[tuple[str, Any]] = []
        self.methods: list[str] = []  # every request and notification the server sent, in order
        self.sent: list[JsonObject] = []  # answers to the agent's own requests
        self.pending: PendingRequests[int] = PendingRequests(itertools.count(100))
        self.session_ids = itertools.count(1)
        self.handlers: dict[str, Handler] = {
            acp.INITIALIZE: self.initialize,
            acp.SESSION_NEW: self.new_session,
            acp.SESSION_RESUME: self.ok,
            acp.SESSION_PROMPT: self.end_turn,
            acp.SESSION_CLOSE: self.ok,
        }
        self.agent_requests: PendingRequests[int] = PendingRequests(itertools.count(500))
        # What the agent writes right behind its answer to a method, before the server's
        # tasks run (as a real agent's next line, read in the same pass).
        self.after_answer: dict[str, Callable[[Any], None]] = {}

    # -- Backend -----------------------------------------------------------------------

    def connect(self, events: AgentEvents, handshake: Handshake) -> None:
        self.events = events
        self.handshake = handshake

    @property
    def pid(self) -> int | None:
        return None

    async def ensure_running(self) -> None:
        if not self.alive:
            self.alive = True
            self.generation += 1

    def call(
        self,
        method: str,
        params: Any,
        on_response: ResponseHook | None = None,
    ) -> asyncio.Future[JsonObject]:
        self.calls.append((method, params))
        self.methods.append(method)
        msg_id, future = self.pending.register(method, on_response)
        task = asyncio.ensure_future(self._answer(msg_id, method, params))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return future

    async def _answer(self, msg_id: int, method: str, params: Any) -> None:
        handler = self.handlers.get(method)
        try:
            if handler is None:
                raise RpcError(acp.METHOD_NOT_FOUND, f"method not found: {method}")
            response = jsonrpc.result(msg_id, await handler(params))
        except RpcError as exc:
            response = jsonrpc.error_response(msg_id, exc)
        self.pending.resolve(msg_id, response)
        if method in self.after_answer:
            self.after_answer[method](params)

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None:
        return self.pending.id_of(future)

    def notify(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))
        self.methods.append(method)

    def send(self, message: JsonObject) -> None:
        self.sent.append(message)
        self.agent_requests.resolve(message.get("id"), message)

    def settle_pending(self, method: str, response: JsonObject) -> None:
        self.pending.settle(method, response)

    async def warm_up(self, cwd: str) -> None:
        """Nothing to start ahead: the fake agent has no process."""

    async def stop(self) -> None:
        self.alive = False

    # -- the agent's behaviour ---------------------------------------------------------

    async def initialize(self, params: Any) -> JsonObject:
        return {
            "protocolVersion": 1,
            "agentCapabilities": self.capabilities,
            "agentInfo": {"name": "fake"},
        }

    async def new_session(self, params: Any) -> JsonObject:
        return {"sessionId": f"agent-{next(self.session_ids)}"}

    async def ok(self, params: Any) -> JsonObject:
        return {}

    async def end_turn(self, params: Any) -> JsonObject:
        self.update(
            params["sessionId"],
            {"sessionUpdate": acp.AGENT_MESSAGE_CHUNK, "content": {"type": "text", "text": "hi"}},
        )
        await self.batch_end()
        return {"stopReason": acp.END_TURN}

    def update(self, agent_session: str, update: JsonObject) -> None:
        assert self.events is not None
        message = jsonrpc.notification(
            acp.SESSION_UPDATE, {"sessionId": agent_session, "update": update}
        )
        self.events.on_agent_notification(message, jsonrpc.encode(message)[:-1])

    async def batch_end(self) -> None:
        assert self.events is not None
        await self.events.on_agent_batch_end()

    def ask(self, method: str, params: JsonObject) -> asyncio.Future[JsonObject]:
        """A request of the agent's own to the editor; resolves with the editor's answer."""
        assert self.events is not None
        msg_id, future = self.agent_requests.register(method)
        self.events.on_agent_request(jsonrpc.request(msg_id, method, params), self.generation)
        return future

    def die(self, description: str = "agent exited with status 1") -> None:
        assert self.events is not None
        self.alive = False
        self.pending.fail_all(
            lambda entry: jsonrpc.error(
                None, acp.INTERNAL_ERROR, f"{description} during {entry.method}"
            )
        )
        self.events.on_agent_exit(description, self.generation)


class EditorSide:
    """The editor's end of an in-memory channel: what the server wrote, parsed back as it
    arrives (every line must be JSON)."""

    def __init__(self, channel: MemoryChannel) -> None:
        self.channel = channel
        self.messages: list[Any] = []
        self.lines: list[bytes] = []  # as they came, byte for byte
        self._changed = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for batch in self.channel.incoming():
            for item in batch:
                assert not isinstance(item, jsonrpc.BadLine), item
                self.lines.append(item[1])
                self.messages.append(json.loads(item[1]))
            self._changed.set()

    async def settled(self) -> None:
        """Until everything the server has written so far has been read."""
        for _ in range(10):
            await asyncio.sleep(0)

    async def response(self, msg_id: Any, timeout: float = 5.0) -> JsonObject:
        """The response with `msg_id`, once the server has sent it."""
        return await self._first(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    async def request(self, method: str, timeout: float = 5.0) -> JsonObject:
        """The first request of `method` the server forwarded to the editor."""
        return await self._first(lambda m: m.get("method") == method and "id" in m, timeout)

    async def _first(self, wanted: Callable[[JsonObject], bool], timeout: float) -> JsonObject:
        async def found() -> JsonObject:
            while True:
                for message in self.messages:
                    if isinstance(message, dict) and wanted(message):
                        return message
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(found(), timeout)

    def notifications(self, method: str) -> list[JsonObject]:
        return [
            m
            for m in self.messages
            if isinstance(m, dict) and m.get("method") == method and "id" not in m
        ]


class Harness:
    """A server with a fake agent and an editor side, in this event loop."""

    def __init__(
        self,
        root: Path,
        agent: FakeAgent | None = None,
        history: bool = True,
        shared: bool = False,
    ) -> None:
        """`shared`: as the session host's connection, which several clients join
        (`another`)."""
        self.agent = agent or FakeAgent()
        server_end, editor_end = memory_pair()
        self.editor = EditorSide(editor_end)
        self.store = SessionStore(root)
        log = logging.getLogger("tests.fake")
        self.conn = Connection(
            self.agent,
            self.store,
            Recorder(self.store, "fake", ["fake-agent"], log, history),
            log,
            silence_s=SILENCE_WARNING_S,
            shared=shared,
        )
        self.server = AcpServer(self.conn)
        self.client = Client(server_end)
        self.endpoint = self.server.join(self.client)
        self.ids: Iterator[int] = itertools.count(1)

    def another(self, may_control: bool = True) -> Harness:
        """A second client of the same connection, as a Harness of its own (its `editor`
        what it was sent, its `send` and `request` its own)."""
        other = object.__new__(Harness)
        server_end, editor_end = memory_pair()
        other.agent, other.store, other.conn, other.server = (
            self.agent,
            self.store,
            self.conn,
            self.server,
        )
        other.editor = EditorSide(editor_end)
        other.client = Client(server_end, may_control=may_control)
        other.endpoint = self.server.join(other.client)
        other.ids = itertools.count(1000)
        return other

    def send(self, message: Any) -> None:
        self.endpoint.dispatch(message)

    async def request(self, method: str, params: Any) -> JsonObject:
        msg_id = next(self.ids)
        self.send(jsonrpc.request(msg_id, method, params))
        return await self.editor.response(msg_id)

    async def result(self, method: str, params: Any) -> Any:
        return jsonrpc.unwrap(await self.request(method, params))

    async def session(self, cwd: str = "/tmp") -> str:
        await self.result(acp.INITIALIZE, {"protocolVersion": 1})
        return str(
            (await self.result(acp.SESSION_NEW, {"cwd": cwd, "mcpServers": []}))["sessionId"]
        )
