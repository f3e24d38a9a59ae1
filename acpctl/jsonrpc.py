"""JSON-RPC 2.0 framing for ACP's stdio transport: one message a line, UTF-8.

Kept free of ACP knowledge: a bounded line splitter, message constructors, an error type,
and an output that writes whole lines to a pipe or a plain file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

from acpctl.protocol import PARSE_ERROR

JsonObject = dict[str, Any]
MessageId = int | str | None

# Lines above this are refused (with a parse error) instead of buffered without bound.
MAX_LINE_BYTES = 64 * 1024 * 1024
READ_CHUNK = 256 * 1024


class RpcError(Exception):
    """An error to send back as a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def request(msg_id: MessageId, method: str, params: Any = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: Any = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(msg_id: MessageId, value: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: MessageId, code: int, message: str, data: Any = None) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "error": RpcError(code, message, data).to_error()}


def encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class OversizedLine(Exception):
    """A line longer than MAX_LINE_BYTES was skipped."""


async def read_batches(
    reader: asyncio.StreamReader, max_line: int = MAX_LINE_BYTES
) -> AsyncIterator[list[bytes | OversizedLine]]:
    """Yield the complete lines available after each read, as one batch.

    Batches let the consumer do per-batch work (flushing history, draining output) once per
    read instead of once per message. An oversized line is reported in place and skipped.
    """
    pending = bytearray()
    skipping = False
    while True:
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            if pending and not skipping:
                yield [bytes(pending)]
            return
        batch: list[bytes | OversizedLine] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            if skipping:
                skipping = False
            elif pending:
                pending += chunk[start:newline]
                batch.append(bytes(pending))
                pending.clear()
            else:
                batch.append(chunk[start:newline])
            start = newline + 1
        if not skipping:
            pending += chunk[start:]
            if len(pending) > max_line:
                pending.clear()
                skipping = True
                batch.append(OversizedLine())
        if batch:
            yield batch


def parse_line(line: bytes) -> Any:
    """Decode one line; raises RpcError(PARSE_ERROR) for invalid UTF-8 or JSON."""
    try:
        return json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}") from exc
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from exc


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
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return cls(None, fd)
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(os.dup(fd), "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, pipe
        )
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
                view = view[os.write(self._fd, view):]
        elif not self._writer.is_closing():
            self._writer.write(data)

    async def drain(self) -> None:
        self.flush()
        if self._writer is not None and not self._writer.is_closing():
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                await self._writer.drain()

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.close()


async def open_input(fd: int) -> asyncio.StreamReader:
    """A StreamReader over `fd`: a pipe or socket directly; files and devices (which epoll
    cannot watch) through a reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
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
