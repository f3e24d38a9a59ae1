"""One `pi --mode rpc` process: commands matched to their responses through the pending
table, every other line handed to the current listener (the running turn)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.agents import signatures
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import Pending
from acpctl.runner.supervisor import AgentProcess

HANDSHAKE_TIMEOUT_S = 30.0
NOISE_KEPT = 5  # non-JSON lines of pi's stdout kept for the error when the handshake fails
NOISE_GRACE_S = 3.0
EXITED = object()  # put on the listener's queue when the child dies


def rpc_argv(argv: list[str]) -> list[str]:
    """pi's command in RPC mode: without `--mode rpc`, pi starts its interactive or print
    mode, which waits for stdin to close and never answers."""
    if "--mode" in argv or any(arg.startswith("--mode=") for arg in argv):
        return argv
    return [*argv, "--mode", "rpc"]


class PiChild:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, log: logging.Logger) -> None:
        self.process = AgentProcess(argv, env, cwd=cwd)
        self.log = log
        self.peer: Peer[str] = Peer(
            self.process.write,
            (f"acpctl-{n}" for n in itertools.count(1)),
            lambda message: message.get("type") == "response",
        )
        self.listener: asyncio.Queue[Any] | None = None
        self.exit_code: int | None = None
        self.reader: asyncio.Task[None] | None = None
        self.noise: collections.deque[str] = collections.deque(maxlen=NOISE_KEPT)
        self._noisy = asyncio.Event()
        self._ending: asyncio.Future[None] | None = None

    async def start(self) -> JsonObject:
        """Spawn pi and wait for its answer to get_state; returns that state."""
        self.process.spawn()
        await self.process.attach(self.log)
        self.reader = asyncio.create_task(self._read())
        try:
            state = await asyncio.wait_for(self._handshake(), HANDSHAKE_TIMEOUT_S)
        except asyncio.TimeoutError as exc:
            await self.stop()
            raise self._failed(
                f"pi did not answer get_state within {HANDSHAKE_TIMEOUT_S:g}s"
            ) from exc
        except RpcError as exc:
            await self.stop()
            raise self._failed(f"pi failed to start: {exc.message}") from exc
        except asyncio.CancelledError:  # the session closed while pi was starting
            await self.stop()
            raise
        return state if isinstance(state, dict) else {}

    async def _handshake(self) -> Any:
        """get_state's answer. Text on stdout first (pi's prelude, or a command that is not
        pi in RPC mode at all) leaves it NOISE_GRACE_S to come, not the whole timeout."""
        state = asyncio.ensure_future(self.command("get_state"))
        noise = asyncio.ensure_future(self._noisy.wait())
        try:
            await asyncio.wait({state, noise}, return_when=asyncio.FIRST_COMPLETED)
            if not state.done():
                await asyncio.wait({state}, timeout=NOISE_GRACE_S)
            if not state.done():
                raise RpcError(acp.INTERNAL_ERROR, "no answer to get_state")
            return state.result()
        finally:
            noise.cancel()
            state.cancel()

    def _failed(self, message: str) -> RpcError:
        """The handshake's error: what pi said on both streams, and a hint when its stdout
        held text instead of JSON (not pi, or not in RPC mode)."""
        if self.noise:
            message += (
                f"; its stdout began with {self.noise[0]!r}, not JSON: is "
                f"`{' '.join(self.process.argv[:1])}` pi, started with --mode rpc?"
            )
        said, data = signatures.explained(message, self.stderr_tail())
        return RpcError(acp.INTERNAL_ERROR, said, {**data, "stdout": list(self.noise)})

    def stderr_tail(self) -> list[str]:
        return list(self.process.stderr_tail)

    @property
    def alive(self) -> bool:
        return self.exit_code is None and self.process.returncode is None

    def send(self, message: JsonObject) -> None:
        self.peer.send(message)

    async def command(self, kind: str, **fields: Any) -> Any:
        """Send a command; its data, or RpcError with pi's error."""
        if not self.alive:
            raise RpcError(acp.INTERNAL_ERROR, "pi is not running", {"stderr": self.stderr_tail()})
        response = await self.peer.command(kind, fields)
        if not response.get("success"):
            raise RpcError(acp.INTERNAL_ERROR, str(response.get("error") or f"{kind} failed"))
        return response.get("data")

    def subscribe(self) -> asyncio.Queue[Any]:
        self.listener = asyncio.Queue()
        if not self.alive:
            self.listener.put_nowait(EXITED)
        return self.listener

    async def _read(self) -> None:
        try:
            await self.peer.read(
                jsonrpc.read_messages(self.process.stdout),
                self._hear,
                self._bad_line,
                closed=self._exited,
            )
        finally:
            if self.listener is not None:
                self.listener.put_nowait(EXITED)

    def _hear(self, message: Any, line: bytes) -> None:
        """Everything but a command's answer is the running turn's."""
        if isinstance(message, dict) and self.listener is not None:
            self.listener.put_nowait(message)

    async def _exited(self) -> Callable[[Pending], JsonObject]:
        self.exit_code = await self.process.wait()
        tail = self.stderr_tail()
        self.log.warning(
            "pi exited with status %s%s",
            self.exit_code,
            "; last stderr lines:\n  " + "\n  ".join(tail) if tail else "",
        )

        def failed(entry: Pending) -> JsonObject:
            return {"success": False, "error": f"pi exited with status {self.exit_code}"}

        return failed

    def _bad_line(self, line: jsonrpc.BadLine) -> None:
        """pi may print a prelude before its JSON: text is logged and dropped. A message it
        sent that cannot be read may be what a command or the turn waits for: the child is
        ended, so that they fail now (the next prompt starts it again)."""
        if line.head and not line.head.lstrip().startswith((b"{", b"[")):
            self.log.info("pi stdout (not JSON): %.200s", line.preview())
            self.noise.append(line.preview()[:120])
            self._noisy.set()
            return
        self.log.warning(
            "pi sent a message acpctl cannot read (%s); ending it",
            line.error.message.removeprefix("parse error: "),
        )
        if self._ending is None:
            self._ending = asyncio.ensure_future(self.process.terminate())

    async def stop(self) -> None:
        await self.process.terminate()
        if self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.reader, 2)
