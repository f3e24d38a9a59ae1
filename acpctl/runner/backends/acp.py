"""The native ACP backend: one agent process per connection, relayed as raw JSON.

acpctl owns the ids on this hop: every request it sends gets a fresh integer id from the
pending table, so the editor's ids and the agent's ids can never collide. Messages from the
agent are parsed only to route them; notifications keep their original bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, PendingRequests, ResponseHook, RpcError
from acpctl.runner.backends import AgentEvents
from acpctl.runner.initialize import AGENT_REQUEST_ID, Exchange
from acpctl.runner.supervisor import AgentProcess, RestartPolicy


class AcpBackend:
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log: logging.Logger,
        prespawned: AgentProcess | None = None,
        exchanged: Exchange | None = None,
    ) -> None:
        self.prespawned = prespawned
        self.argv = argv
        self.env = env
        self.log = log
        self.events: AgentEvents | None = None
        self.process: AgentProcess | None = None
        self.generation = 0
        self.alive = False
        self.agent_capabilities: JsonObject = {}
        self.initialize_params: JsonObject | None = None
        self.authenticate_params: JsonObject | None = None
        self.restarts = RestartPolicy()
        self.pending: PendingRequests[int] = PendingRequests(itertools.count(AGENT_REQUEST_ID))
        # An initialize `exchanged` sent before the server was up (runner/initialize.py):
        # answered to the editor already, or the agent's answer still to come as request 1.
        self._sent_initialize: JsonObject | None = None
        self._early_initialize: asyncio.Future[JsonObject] | None = None
        if exchanged is not None and exchanged.sent is not None:
            if exchanged.agent_capabilities is not None:
                self.initialize_params = exchanged.sent
                self.agent_capabilities = exchanged.agent_capabilities
                self.pending = PendingRequests(itertools.count(AGENT_REQUEST_ID + 1))
            else:
                self._sent_initialize = exchanged.sent
        self._starting: asyncio.Lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False
        self._ending: asyncio.Future[None] | None = None

    def connect(self, events: AgentEvents) -> None:
        self.events = events

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
                await self._restart_delay()
            process = await self._start()
            self.process = process
            self.generation += 1
            self.alive = True
            if self._sent_initialize is not None and self.generation == 1:
                msg_id, self._early_initialize = self.pending.register(acp.INITIALIZE)
                assert msg_id == AGENT_REQUEST_ID
            self._reader = asyncio.create_task(self._read(process, self.generation))
            if self.initialize_params is not None and self.generation > 1:
                await self._replay_handshake()

    async def _restart_delay(self) -> None:
        delay = self.restarts.next_delay()
        if delay is None:
            raise RpcError(acp.INTERNAL_ERROR, self.restarts.refusal("the agent"))
        if delay:
            await asyncio.sleep(delay)
        self.log.info("restarting the agent")

    async def _start(self) -> AgentProcess:
        process, self.prespawned = self.prespawned, None
        try:
            if process is None or process.popen is None:
                process = AgentProcess(self.argv, self.env)
                process.spawn()
            await process.attach(self.log)
        except OSError as exc:
            raise RpcError(
                acp.INTERNAL_ERROR, f"cannot start agent {self.argv[0]}: {exc.strerror or exc}"
            ) from exc
        return process

    async def _replay_handshake(self) -> None:
        result = jsonrpc.unwrap(await self.call(acp.INITIALIZE, self.initialize_params))
        self.agent_capabilities = result.get("agentCapabilities") or {}
        if self.authenticate_params is not None:
            jsonrpc.unwrap(await self.call(acp.AUTHENTICATE, self.authenticate_params))

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

    def call(
        self,
        method: str,
        params: Any,
        on_response: ResponseHook | None = None,
    ) -> asyncio.Future[JsonObject]:
        """Send a request now; the future resolves to the agent's response message.

        `on_response` runs in the read loop as soon as the response arrives, before any
        later message from the agent is routed (session/new relies on this)."""
        if not self.alive or self.process is None:
            future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
            future.set_result(jsonrpc.error(None, acp.INTERNAL_ERROR, "agent is not running"))
            return future
        if self._early_initialize is not None and method == acp.INITIALIZE:
            early, self._early_initialize = self._early_initialize, None
            if params == self._sent_initialize:  # the editor's, sent already: its answer
                return early
        msg_id, future = self.pending.register(method, on_response)
        self.process.write(jsonrpc.encode(jsonrpc.request(msg_id, method, params)))
        return future

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None:
        return self.pending.id_of(future)

    def notify(self, method: str, params: Any) -> None:
        if self.alive and self.process is not None:
            self.process.write(jsonrpc.encode(jsonrpc.notification(method, params)))

    def send(self, message: JsonObject) -> None:
        if self.alive and self.process is not None:
            self.process.write(jsonrpc.encode(message))

    def settle_pending(self, method: str, response: JsonObject) -> None:
        self.pending.settle(method, response)

    # -- receiving ----------------------------------------------------------------------

    async def _read(self, process: AgentProcess, generation: int) -> None:
        assert self.events is not None, "connect() the backend to the server first"
        unreadable: str | None = None
        async for batch in jsonrpc.read_messages(process.stdout):
            for item in batch:
                if not isinstance(item, jsonrpc.BadLine):
                    try:
                        self._route(*item, generation)
                    except Exception:  # a bug must not stop the agent's reader
                        self.log.exception("internal error routing the agent's message")
                elif not self._stopping and unreadable is None:
                    unreadable = self._bad_line(item, process)
            await self.events.on_agent_batch_end()
        code = await process.wait()
        self.alive = False
        description = unreadable or process.describe_exit(code)
        tail = list(process.stderr_tail)
        if not self._stopping:
            # An agent that ends with status 0 on its own is not a failure to warn about.
            self.log.log(
                logging.INFO if code == 0 and unreadable is None else logging.WARNING,
                "%s%s",
                description,
                "; last stderr lines:\n  " + "\n  ".join(tail) if tail else "",
            )
        self.pending.fail_all(
            lambda entry: jsonrpc.error(
                None,
                acp.INTERNAL_ERROR,
                f"{description} during {entry.method}",
                {"exitStatus": code, "stderr": tail},
            )
        )
        if not self._stopping:
            self.events.on_agent_exit(description, generation)

    def _bad_line(self, line: jsonrpc.BadLine, process: AgentProcess) -> str | None:
        """Text that is not JSON (a banner) is logged and dropped. A message acpctl cannot
        read (too large, too deep, broken) may have been the answer a request waits for:
        the agent is ended, so that every waiting request fails now, and the next request
        starts it again. Returns what the requests fail with, in that case."""
        head = line.head.lstrip()
        if line.whole:
            # A number out of range in one message: that message fails, the agent goes on.
            self.log.warning("agent sent a message acpctl cannot pass on: %s", line.error.message)
            self.pending.resolve(
                line.msg_id, jsonrpc.error(line.msg_id, acp.INTERNAL_ERROR, line.error.message)
            )
            return None
        if line.head and not head.startswith((b"{", b"[")):
            self.log.warning(
                "agent wrote a line that is not JSON-RPC to stdout "
                "(stdout must carry only JSON-RPC; %s): %r",
                line.error.message,
                line.preview(),
            )
            return None
        reason = line.error.message.removeprefix("parse error: ")
        self.log.warning("agent sent a message acpctl cannot read (%s); ending it", reason)
        self._ending = asyncio.ensure_future(process.terminate())
        return (
            f"the agent sent a message acpctl cannot read ({reason}); acpctl ended it, "
            "and the next request starts it again"
        )

    def _route(self, message: Any, line: bytes, generation: int) -> None:
        assert self.events is not None
        if not isinstance(message, dict):
            self.log.warning("agent sent a JSON value that is not a message: %.200r", line)
            return
        if "method" in message:
            if "id" not in message:
                self.events.on_agent_notification(message, line)
            elif jsonrpc.is_id(message["id"]):
                self.events.on_agent_request(message, generation)
            else:
                self.log.warning("agent sent a request with an invalid id: %.200r", line)
            return
        if self.pending.resolve(message.get("id"), message) is None:
            self.log.warning("agent answered an unknown request id %r", message.get("id"))
