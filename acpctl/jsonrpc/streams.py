"""The two ends of a stdio connection as asyncio objects: an output that writes whole lines
to a pipe or a plain file, and an input reader over a pipe, socket, file or device."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from typing import Any

from acpctl.jsonrpc.framing import READ_CHUNK
from acpctl.jsonrpc.messages import encode

WRITE_BUFFER_BYTES = 1 << 20
# The agent's output pipe, and every pipe acpctl writes lines to through Output (its own
# to the editor, above all), are widened from Linux's 64 KiB: a stream of lines then
# crosses each in fewer, larger reads and writes, each waking the other side once. With 64
# KiB the writer filled the pipe, and then wrote again, a little, each time the reader had
# taken a little.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Best effort: Linux only, and capped by /proc/sys/fs/pipe-max-size."""
    with contextlib.suppress(ImportError, AttributeError, OSError):
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


class Output:
    """Whole-line writes to a pipe (non-blocking, with backpressure) or a regular file.

    Writes made in one turn of the event loop are joined into one system call: a stream
    of small notifications would otherwise cost a write() each."""

    def __init__(self, writer: asyncio.StreamWriter | None, fd: int) -> None:
        self._writer = writer
        self._fd = fd
        self._pending: list[bytes] = []
        self._scheduled = False

    @classmethod
    async def open(cls, fd: int) -> Output:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return cls(None, fd)
        if stat.S_ISFIFO(mode):
            widen_pipe(fd)
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(os.dup(fd), "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        # Room to run ahead of a slow reader (the default pauses at 64 KiB): a stream of
        # updates then goes through in larger writes with fewer pauses.
        transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(writer, fd)

    def write(self, data: bytes) -> None:
        self._pending.append(data)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def send(self, message: Any) -> None:
        self.write(encode(message))

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if self._writer is None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        elif not self._writer.is_closing():
            self._writer.write(data)

    async def drain(self) -> None:
        self.flush()
        if self._writer is not None and not self._writer.is_closing():
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                await self._writer.drain()

    async def room(self) -> None:
        """Backpressure without a flush: waits only while the pipe holds more than its
        limit, so writes made in one turn of the loop still go out in one system call."""
        writer = self._writer
        if (
            writer is not None
            and not writer.is_closing()
            and writer.transport.get_write_buffer_size() >= WRITE_BUFFER_BYTES
        ):
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                await writer.drain()

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.close()


def line_reader() -> asyncio.StreamReader:
    """A StreamReader for read_lines (or plain reads) over a pipe or socket. It stops
    reading its pipe once it holds twice its limit; the lines are framed (and their length
    bounded) by read_lines, not by the reader, so the limit only says how far acpctl reads
    ahead of what it has handled. With MAX_LINE_BYTES, a peer faster than acpctl's reader
    had 128 MiB buffered here, and each read then moved that backlog in memory (a fifth of
    the relay's time with a fast agent)."""
    return asyncio.StreamReader(limit=READ_CHUNK)


async def open_input(fd: int) -> asyncio.StreamReader:
    """A StreamReader over `fd`: a pipe or socket directly; files and devices (which epoll
    cannot watch) through a reader thread."""
    loop = asyncio.get_running_loop()
    reader = line_reader()
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return reader

    def pump() -> None:
        while chunk := os.read(fd, READ_CHUNK):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    loop.run_in_executor(None, pump)
    return reader


class MemoryPipe:
    """A pipe within one process: what is written goes straight into the StreamReader the
    other side reads (`reader`), with no system call and no wait for the event loop to
    see a file descriptor ready. It is written as an Output is, and holds back the same
    way: the reader pauses it (it is the reader's transport) once it holds twice its
    limit, and drain() and room() wait until it has read some. Closed by either side:
    the reader sees the end, and what is written after it is dropped."""

    def __init__(self) -> None:
        self.reader = line_reader()
        self.reader.set_transport(self)  # type: ignore[arg-type]
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False

    # As the reader's transport: told to pause and resume.
    def pause_reading(self) -> None:
        self._room.clear()

    def resume_reading(self) -> None:
        self._room.set()

    # As an Output.
    def write(self, data: bytes) -> None:
        if not self._closed:
            self.reader.feed_data(data)

    def flush(self) -> None:
        pass  # nothing is held here

    async def drain(self) -> None:
        await self.room()

    async def room(self) -> None:
        await self._room.wait()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.reader.feed_eof()
            self._room.set()


Lines = Output | MemoryPipe  # where whole lines are written
