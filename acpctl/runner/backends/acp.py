"""The native ACP backend: one agent process per connection, relayed as raw JSON.

acpctl owns the ids on this hop: every request it sends gets a fresh integer id from the
peer's pending table, so the editor's ids and the agent's ids can never collide. Messages
from the agent are parsed only to route them; notifications keep their original bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.agents import signatures
from acpctl.jsonrpc import JsonObject, ResponseHook, RpcError
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import Pending
from acpctl.runner.backends import AgentEvents
from acpctl.runner.handshake import Handshake
from acpctl.runner.supervisor import AgentProcess, RestartPolicy

# A turn and a sign-in take as long as they take: no deadline of acpctl's.
UNTIMED_METHODS = frozenset({acp.SESSION_PROMPT, acp.AUTHENTICATE})


class AcpBackend:
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log: logging.Logger,
        spawned: subprocess.Popen[bytes] | None = None,
        request_timeout_s: float = 0.0,
    ) -> None:
        self.spawned = spawned  # the first process, started from argv before the loop ran
        self.request_timeout_s = request_timeout_s  # 0: no deadline
        self.argv = argv
        self.env = env
        self.log = log
        self.events: AgentEvents | None = None
        self.handshake = Handshake()  # the connection's, given by connect()
        self.process: AgentProcess | None = None
        self.peer: Peer[int] | None = None
        self.generation = 0
        self.alive = False
        self.restarts = RestartPolicy()
        self._starting: asyncio.Lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False
        self._ending: asyncio.Future[None] | None = None

    def connect(self, events: AgentEvents, handshake: Handshake) -> None:
        self.events = events
        self.handshake = handshake

    # -- lifecycle ----------------------------------------------------------------------

    async def ensure_running(self) -> None:
        """Start the agent, or restart it after a crash with the connection's handshake
        replayed. A restarted agent that refuses the handshake is ended, not used: the
        request that wanted it fails, and the next one tries again."""
        async with self._starting:
            if self.alive:
                return
            if self._stopping:
                raise RpcError(acp.INTERNAL_ERROR, "acpctl is shutting down")
            if self.generation > 0:
                await self._restart_delay()
            process = await self._start()
            peer: Peer[int] = Peer(process.write)
            self.process, self.peer = process, peer
            self.generation += 1
            self._reader = asyncio.create_task(self._read(process, peer, self.generation))
            if self.generation > 1 and self.handshake.started:
                await self._replay_handshake(process, peer)
            self.alive = True

    async def _restart_delay(self) -> None:
        delay = self.restarts.next_delay()
        if delay is None:
            raise RpcError(acp.INTERNAL_ERROR, self.restarts.refusal("the agent"))
        if delay:
            await asyncio.sleep(delay)
        self.log.info("restarting the agent")

    async def _start(self) -> AgentProcess:
        process = AgentProcess(self.argv, self.env, popen=self.spawned)
        self.spawned = None
        try:
            if process.popen is None:
                process.spawn()
            await process.attach(self.log)
        except OSError as exc:
            raise RpcError(
                acp.INTERNAL_ERROR, f"cannot start agent {self.argv[0]}: {exc.strerror or exc}"
            ) from exc
        return process

    async def _replay_handshake(self, process: AgentProcess, peer: Peer[int]) -> None:
        try:
            await self.handshake.replay(lambda method, params: self._request(peer, method, params))
        except RpcError as exc:
            self.log.warning(
                "the restarted agent refused the connection's handshake (%s); ending it",
                exc.message,
            )
            await process.terminate()
            raise RpcError(
                acp.INTERNAL_ERROR,
                f"the restarted agent refused initialize or authenticate: {exc.message}",
                exc.data,
            ) from exc

    async def warm_up(self, cwd: str) -> None:
        """Nothing more: the agent is started and initialized already, and a session opened
        ahead would be a guess (session/new is the agent's own cost)."""

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
        later message from the agent is routed (session/new relies on this); and with
        whatever answers the request for the agent (it is not running, it died, it took
        too long, acpctl is shutting down)."""
        if not self.alive or self.peer is None:
            future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
            response = jsonrpc.error(None, acp.INTERNAL_ERROR, "agent is not running")
            if on_response is not None:
                on_response(response)
            future.set_result(response)
            return future
        return self._request(self.peer, method, params, on_response)

    def _request(
        self,
        peer: Peer[int],
        method: str,
        params: Any,
        on_response: ResponseHook | None = None,
    ) -> asyncio.Future[JsonObject]:
        """Every request to the agent, the replayed handshake's too, goes out here: with
        the deadline, unless it is a turn or a sign-in."""
        future = peer.call(method, params, on_response)
        if self.request_timeout_s > 0 and method not in UNTIMED_METHODS:
            self._deadline(peer, future, method)
        return future

    def _deadline(self, peer: Peer[int], future: asyncio.Future[JsonObject], method: str) -> None:
        """The request fails after request_timeout_s without an answer: the editor gets an
        error that says so, and the log names the request (a late answer is logged and
        dropped)."""
        msg_id = peer.id_of(future)
        timeout = self.request_timeout_s

        def expire() -> None:
            message = (
                f"the agent did not answer {method} within {timeout:g} s (request_timeout_s "
                "in config.toml)"
            )
            if peer.pending.resolve(msg_id, jsonrpc.error(None, acp.INTERNAL_ERROR, message)):
                self.log.warning("%s; agent request id %s", message, msg_id)

        timer = asyncio.get_running_loop().call_later(timeout, expire)
        future.add_done_callback(lambda _: timer.cancel())

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None:
        return self.peer.id_of(future) if self.peer is not None else None

    def notify(self, method: str, params: Any) -> None:
        if self.alive and self.peer is not None:
            self.peer.notify(method, params)

    def send(self, message: JsonObject) -> None:
        if self.alive and self.peer is not None:
            self.peer.send(message)

    def settle_pending(self, method: str, response: JsonObject) -> None:
        if self.peer is not None:
            self.peer.pending.settle(method, response)

    # -- receiving ----------------------------------------------------------------------

    async def _read(self, process: AgentProcess, peer: Peer[int], generation: int) -> None:
        """Read the agent until its stdout closes. Whatever ends the read, every request
        still waiting is answered (the peer's rule), and the exit is reported."""
        assert self.events is not None, "connect() the backend to the server first"
        events = self.events
        unreadable: str | None = None  # why the agent was ended, when a line was unreadable
        description = "agent is not running"  # how it ended, once it has

        def bad_line(line: jsonrpc.BadLine) -> None:
            nonlocal unreadable
            if not self._stopping and unreadable is None:
                unreadable = self._bad_line(line, process, peer)

        async def exited() -> Callable[[Pending], JsonObject]:
            nonlocal description
            code = await process.wait()
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

            def failed(entry: Pending) -> JsonObject:
                said, data = signatures.explained(f"{description} during {entry.method}", tail)
                return jsonrpc.error(None, acp.INTERNAL_ERROR, said, {"exitStatus": code, **data})

            return failed

        try:
            await peer.read(
                jsonrpc.read_messages(process.stdout),
                lambda message, line: self._route(message, line, generation),
                bad_line,
                events.on_agent_batch_end,
                exited,
            )
        finally:
            if self.peer is peer:
                self.alive = False
        if not self._stopping:
            events.on_agent_exit(description, generation)

    def _bad_line(
        self, line: jsonrpc.BadLine, process: AgentProcess, peer: Peer[int]
    ) -> str | None:
        """Text that is not JSON (a banner) is logged and dropped. A message acpctl cannot
        read (too large, too deep, broken) may have been the answer a request waits for:
        the agent is ended, so that every waiting request fails now, and the next request
        starts it again. Returns what the requests fail with, in that case."""
        head = line.head.lstrip()
        if line.whole:
            # A number out of range in one message: that message fails, the agent goes on.
            self.log.warning("agent sent a message acpctl cannot pass on: %s", line.error.message)
            peer.pending.resolve(
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
        if "method" not in message:
            self.log.warning("agent answered an unknown request id %r", message.get("id"))
        elif "id" not in message:
            self.events.on_agent_notification(message, line)
        elif jsonrpc.is_id(message["id"]):
            self.events.on_agent_request(message, generation)
        else:
            self.log.warning("agent sent a request with an invalid id: %.200r", line)
