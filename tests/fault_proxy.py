"""A TCP proxy on 127.0.0.1 that cuts its connections when told: at once (both ends
aborted, as a dead network leaves them), in the middle of the next chunk it forwards (a
frame cut in two), or by refusing new connections for a while (an outage)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Pipe:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    half_next: bool = False  # forward half of the next downstream chunk, then cut
    cut_after: int | None = None  # cut once this many bytes went downstream
    sent: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            transport = writer.transport
            if not transport.is_closing():
                transport.abort()


class FaultProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.refusing = False
        self.cuts = 0
        self.accepted = 0
        self.refused = 0
        self._pipes: set[_Pipe] = set()
        self._server: asyncio.AbstractServer | None = None
        self.downstream_bytes = 0
        self._cut_next_after: int | None = None

    async def start(self, address: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on `address`; on another loopback address than the target's, the target's
        port can be kept (an HTTP server checks the port in the Host header)."""
        self._server = await asyncio.start_server(self._accept, address, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()

    async def until(self, condition: Callable[[], bool], timeout: float = 30) -> None:
        """Wait until `condition` holds of the proxy's counts (a connection tried, say)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, "the proxy never saw it"
            await asyncio.sleep(0.02)

    @property
    def open(self) -> int:
        return len(self._pipes)

    def cut_next(self, after_bytes: int) -> None:
        """Cut the next connection once it has sent its client `after_bytes` (the
        upgrade's answer, say: then what the client sends first is lost)."""
        self._cut_next_after = after_bytes

    def cut(self, mid_frame: bool = False) -> None:
        """Cut every open connection: now, or once half of the next chunk from the server
        has gone to the client."""
        if self._pipes:
            self.cuts += 1
        for pipe in list(self._pipes):
            if mid_frame:
                pipe.half_next = True
            else:
                pipe.abort()
                self._pipes.discard(pipe)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        pipe = _Pipe(writer, up_writer, cut_after=self._cut_next_after)
        self._cut_next_after = None
        self._pipes.add(pipe)
        pipe.tasks = [
            asyncio.ensure_future(self._pump(reader, up_writer, pipe, downstream=False)),
            asyncio.ensure_future(self._pump(up_reader, writer, pipe, downstream=True)),
        ]

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        pipe: _Pipe,
        downstream: bool,
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(1 << 16):
                if downstream and pipe.half_next and len(data) > 1:
                    sink.write(data[: len(data) // 2])
                    await sink.drain()
                    break
                if downstream:
                    self.downstream_bytes += len(data)
                    pipe.sent += len(data)
                sink.write(data)
                await sink.drain()
                if downstream and pipe.cut_after is not None and pipe.sent >= pipe.cut_after:
                    self.cuts += 1
                    break
        pipe.abort()
        self._pipes.discard(pipe)
