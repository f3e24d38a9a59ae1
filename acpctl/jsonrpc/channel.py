"""A channel: one peer's end of a JSON-RPC connection, as the server sees it. Lines go out
whole (`send`, `write`), and come in as the read loop's batches (`incoming`).

The server knows its client only through this interface, so the same server runs over
stdio (an editor), a unix socket and a WebSocket (the session host's clients), an in-memory
pair (the in-process tests), and any other transport that delivers whole lines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

from acpctl.jsonrpc.framing import MAX_LINE_BYTES, Batch, read_messages
from acpctl.jsonrpc.messages import encode
from acpctl.jsonrpc.streams import Output, open_input


class Recorded(Protocol):
    """What recorded a relayed line (the server's session record), which can say where."""

    def stored_last(self) -> tuple[str, int, int] | None:
        """Where the line it recorded last is kept, in the recorder's terms (None: it
        cannot say)."""


class Channel(Protocol):
    def send(self, message: Any) -> None:
        """Write one message as a line."""

    def write(self, data: bytes) -> None:
        """Write whole lines as they are (a relayed notification keeps its bytes)."""

    def relay(self, line: bytes, message: Any, recorded: Recorded | None = None) -> None:
        """Write one line as it is, which the server has decoded already to `message` (an
        agent's notification): a channel that must look into it need not decode it again.
        `recorded`: what has just recorded the line as it is, for a channel that keeps what
        it sent and would rather read it back from there. Asked only by such a channel:
        saying where costs more than the rest of a line's relay."""

    async def drain(self) -> None:
        """Until what was written has been taken by the transport."""

    def incoming(self) -> AsyncIterator[Batch]:
        """The peer's messages, a batch per read, until it closes its end."""

    def close(self) -> None: ...


class StreamChannel:
    """A peer on a byte stream: the editor on this process's stdin and stdout (`open`)."""

    def __init__(self, reader: asyncio.StreamReader, output: Output) -> None:
        self._reader = reader
        self._output = output

    @classmethod
    async def open(cls, in_fd: int = 0, out_fd: int = 1) -> StreamChannel:
        return cls(await open_input(in_fd), await Output.open(out_fd))

    def send(self, message: Any) -> None:
        self._output.send(message)

    def write(self, data: bytes) -> None:
        self._output.write(data)

    def relay(self, line: bytes, message: Any, recorded: Recorded | None = None) -> None:
        self._output.write(line)

    async def drain(self) -> None:
        await self._output.drain()

    def incoming(self) -> AsyncIterator[Batch]:
        return read_messages(self._reader)

    def close(self) -> None:
        self._output.close()


class MemoryChannel:
    """One end of an in-memory pair (`memory_pair`): what it writes, the other end reads."""

    def __init__(self) -> None:
        self._reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self._ended = False  # the other end closed: nothing more comes in
        self.peer: MemoryChannel | None = None

    def send(self, message: Any) -> None:
        self.write(encode(message))

    def write(self, data: bytes) -> None:
        assert self.peer is not None
        if not self.peer._ended:
            self.peer._reader.feed_data(data)

    def relay(self, line: bytes, message: Any, recorded: Recorded | None = None) -> None:
        self.write(line)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def incoming(self) -> AsyncIterator[Batch]:
        return read_messages(self._reader)

    def close(self) -> None:
        assert self.peer is not None
        if not self.peer._ended:
            self.peer._ended = True
            self.peer._reader.feed_eof()


def memory_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected ends: a server's and its client's."""
    server, client = MemoryChannel(), MemoryChannel()
    server.peer, client.peer = client, server
    return server, client
