"""The native ACP backend: one agent process per connection, relayed as raw JSON.

acpctl owns the ids on this hop: every request it sends gets a fresh integer id and a
pending entry, so the editor's ids and the agent's ids can never collide. Messages from the
agent are parsed only to route them; notifications keep their original bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.supervisor import AgentProcess, RestartPolicy

ResponseHook = Callable[[JsonObject], None]


class AgentEvents(Protocol):
    """What a backend tells the server (implemented by runner.server.AcpServer)."""

    def on_agent_request(self, message: JsonObject, generation: int) -> None: ...
    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None: ...
    async def on_agent_batch_end(self) -> None: ...
    def on_agent_exit(self, description: str, generation: int) -> None: ...


@dataclass
class _Pending:
    future: asyncio.Future[JsonObject]
    method: str
    on_response: ResponseHook | None


def unwrap(response: JsonObject) -> Any:
    """The result of a response, or its error raised as RpcError."""
    if "error" in response:
        error = response["error"] if isinstance(response["error"], dict) else {}
        raise RpcError(int(error.get("code", acp.INTERNAL_ERROR)),
                       str(error.get("message", "agent error")), error.get("data"))
    return response.get("result")


class AcpBackend:
    def __init__(self, argv: list[str], env: dict[str, str], log: logging.Logger,
                 events: AgentEvents, prespawned: AgentProcess | None = None) -> None:
        self.prespawned = prespawned
        self.argv = argv
        self.env = env
        self.log = log
        self.events = events
        self.process: AgentProcess | None = None
        self.generation = 0
        self.alive = False
        self.agent_capabilities: JsonObject = {}
        self.initialize_params: JsonObject | None = None
        self.authenticate_params: JsonObject | None = None
        self.restarts = RestartPolicy()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._starting: asyncio.Lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------

    async def ensure_running(self) -> None:
        """Start the agent, or restart it after a crash and replay initialize (and
        authenticate) as the editor first sent them."""
        async with self._starting:
            if self.alive:
                return
            if self._stopping:
                raise RpcError(acp.INTERNAL_ERROR, "acpctl is shutting down")
            if self.generation > 0:
                delay = self.restarts.next_delay()
                if delay is None:
                    raise RpcError(acp.INTERNAL_ERROR,
                                   "the agent crashed 5 times in the last minute; acpctl stopped "
                                   "restarting it (see `acpctl logs` and `acpctl doctor`)")
                if delay:
                    await asyncio.sleep(delay)
                self.log.info("restarting the agent")
            process, self.prespawned = self.prespawned, None
            try:
                if process is None or process.popen is None:
                    process = AgentProcess(self.argv, self.env)
                    process.spawn()
                await process.attach(self.log)
            except OSError as exc:
                raise RpcError(acp.INTERNAL_ERROR,
                               f"cannot start agent {self.argv[0]}: {exc.strerror or exc}") from exc
            self.process = process
            self.generation += 1
            self.alive = True
            self._reader = asyncio.create_task(self._read(process, self.generation))
            if self.initialize_params is not None and self.generation > 1:
                result = unwrap(await self.call(acp.INITIALIZE, self.initialize_params))
                self.agent_capabilities = result.get("agentCapabilities") or {}
                if self.authenticate_params is not None:
                    unwrap(await self.call(acp.AUTHENTICATE, self.authenticate_params))

    async def stop(self) -> None:
        self._stopping = True
        async with self._starting:  # an agent being started is ended too, once it is up
            if self.process is not None:
                await self.process.terminate()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 2.0)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.alive else None

    # -- sending ------------------------------------------------------------------------

    def call(self, method: str, params: Any, on_response: ResponseHook | None = None,
             ) -> asyncio.Future[JsonObject]:
        """Send a request now; the future resolves to the agent's response message.

        `on_response` runs in the read loop as soon as the response arrives, before any
        later message from the agent is routed (session/new relies on this)."""
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        if not self.alive or self.process is None:
            future.set_result(jsonrpc.error(None, acp.INTERNAL_ERROR, "agent is not running"))
            return future
        msg_id = next(self._ids)
        self._pending[msg_id] = _Pending(future, method, on_response)
        self.process.write(jsonrpc.encode(jsonrpc.request(msg_id, method, params)))
        return future

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None:
        for msg_id, pending in self._pending.items():
            if pending.future is future:
                return msg_id
        return None

    def notify(self, method: str, params: Any) -> None:
        if self.alive and self.process is not None:
            self.process.write(jsonrpc.encode(jsonrpc.notification(method, params)))

    def send(self, message: JsonObject) -> None:
        if self.alive and self.process is not None:
            self.process.write(jsonrpc.encode(message))

    def settle_pending(self, method: str, response: JsonObject) -> None:
        """Resolve every pending request of `method` with `response` (used at shutdown)."""
        for msg_id, pending in list(self._pending.items()):
            if pending.method == method and not pending.future.done():
                del self._pending[msg_id]
                pending.future.set_result(response)

    # -- receiving ----------------------------------------------------------------------

    async def _read(self, process: AgentProcess, generation: int) -> None:
        async for batch in jsonrpc.read_batches(process.stdout):
            for line in batch:
                if isinstance(line, jsonrpc.OversizedLine):
                    self.log.warning("agent wrote an over-long line to stdout; dropped")
                    continue
                self._route(line, generation)
            await self.events.on_agent_batch_end()
        code = await process.wait()
        self.alive = False
        description = process.describe_exit(code)
        tail = list(process.stderr_tail)
        if not self._stopping:
            self.log.warning("%s%s", description,
                             "; last stderr lines:\n  " + "\n  ".join(tail) if tail else "")
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_result(jsonrpc.error(
                    None, acp.INTERNAL_ERROR, f"{description} during {entry.method}",
                    {"exitStatus": code, "stderr": tail[-10:]},
                ))
        if not self._stopping:
            self.events.on_agent_exit(description, generation)

    def _route(self, line: bytes, generation: int) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            text = line[:200].decode("utf-8", "replace")
            self.log.warning("agent wrote non-JSON to stdout (stdout must carry only "
                             "JSON-RPC): %r", text)
            return
        if not isinstance(message, dict):
            self.log.warning("agent sent a JSON value that is not a message: %.200s", line)
            return
        if "method" in message:
            if "id" in message:
                self.events.on_agent_request(message, generation)
            else:
                self.events.on_agent_notification(message, line)
            return
        msg_id = message.get("id")
        entry = self._pending.pop(msg_id, None) if isinstance(msg_id, int) else None
        if entry is None:
            self.log.warning("agent answered an unknown request id %r", msg_id)
            return
        if entry.on_response is not None:
            entry.on_response(message)
        if not entry.future.done():
            entry.future.set_result(message)
