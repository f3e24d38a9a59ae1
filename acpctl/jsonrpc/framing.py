"""Line framing for stdio JSON-RPC (and pi's JSONL): one message a line, UTF-8.

`read_messages` is the one read loop every connection uses. It decides, in one place, what
a line that cannot be a message gets: an oversized, non-UTF-8, non-JSON or too deeply
nested line becomes a `BadLine` carrying the parse error to answer with (or to log); it
never ends the loop, and never raises.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acpctl.jsonrpc.messages import PARSE_ERROR, RpcError, is_id
from acpctl.jsontext import REFUSED, OutOfRange, decode_fast, decode_text

if TYPE_CHECKING:  # the loop is the caller's: this module needs no asyncio of its own
    import asyncio

# Lines above this are refused (with a parse error) instead of buffered without bound.
MAX_LINE_BYTES = 64 * 1024 * 1024
READ_CHUNK = 256 * 1024
BAD_LINE_SHOWN = 200  # bytes of a bad line kept for logs

# A parsed line: the value and the line's own bytes (notifications are relayed as these).
Message = tuple[Any, bytes]


@dataclass
class BadLine:
    """A line that is not a JSON value acpctl can pass on: `error` says why, `head` is its
    start, for logs; `msg_id` the request's id when the line is a request whose id could
    still be read (a number out of range elsewhere in it), for the error response."""

    error: RpcError
    head: bytes
    msg_id: Any = None
    # Valid JSON that holds a number out of range: a whole message, not a broken stream.
    whole: bool = False

    def preview(self) -> str:
        return self.head.decode("utf-8", "replace")


# The messages of one read, taken in order and once. read_messages parses each as it is
# taken: a read of a fast agent holds a thousand lines, and decoding them all first kept a
# thousand messages alive at once, which the garbage collector then traversed again and
# again (a quarter of the relay's time with a fast agent).
Batch = Iterable[Message | BadLine]


async def read_lines(
    reader: asyncio.StreamReader,
    max_line: int = MAX_LINE_BYTES,
) -> AsyncIterator[list[bytes | None]]:
    """Yield the complete lines available after each read, as one batch; None stands for
    a line over `max_line`, which is skipped.

    Batches let the consumer do per-batch work (flushing history, draining output) once per
    read instead of once per message."""
    pending = bytearray()  # a line's start from earlier reads
    skipping = False
    while True:
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            if pending and not skipping:
                yield [bytes(pending)]
            return
        # split() cuts the whole chunk in C; the last piece is the start of a line still
        # coming (empty when the chunk ended with a newline).
        pieces = chunk.split(b"\n")
        rest = pieces.pop()
        if pieces:
            if skipping:  # the first piece ends the line being skipped
                del pieces[0]
                skipping = False
            elif pending:
                pending += pieces[0]
                pieces[0] = bytes(pending)
            pending.clear()
        batch: list[bytes | None] = [*pieces]
        if max(map(len, pieces), default=0) > max_line:
            batch = [line if len(line) <= max_line else None for line in pieces]
        if not skipping:
            pending += rest
            if len(pending) > max_line:
                pending.clear()
                skipping = True
                batch.append(None)
        if batch:
            yield batch


def parse_line(line: bytes) -> Any:
    """Decode one line; raises RpcError(PARSE_ERROR) for whatever is not a JSON value, and
    for numbers acpctl cannot pass on exactly: `1e999` would become Infinity, which JSON
    cannot carry (the error's data then holds the message's id, when it has one)."""
    try:
        return decode_text(line)
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}") from exc
    except RecursionError as exc:
        raise RpcError(PARSE_ERROR, "parse error: nested too deeply") from exc
    except OutOfRange as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}", {"id": _id_of(line)}) from exc
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from exc


def _id_of(line: bytes) -> Any:
    """The id of a message that holds an out-of-range number, read leniently."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value.get("id") if isinstance(value, dict) and is_id(value.get("id")) else None


async def read_messages(
    reader: asyncio.StreamReader,
    max_line: int = MAX_LINE_BYTES,
) -> AsyncIterator[Batch]:
    """Yield the messages of each read as one batch: (value, line) pairs, or BadLine."""
    async for lines in read_lines(reader, max_line):
        yield _parsed(lines, max_line)


def _parsed(lines: list[bytes | None], max_line: int) -> Iterator[Message | BadLine]:
    for line in lines:
        if line is None:
            yield BadLine(
                RpcError(PARSE_ERROR, f"parse error: message exceeds {max_line >> 20} MiB"), b""
            )
            continue
        try:  # the relay's hot path: a line is one call into msgspec
            value = decode_fast(line)
        except REFUSED:  # parse_message accepts it, or says why not
            if line.strip():  # a blank line is no message
                yield parse_message(line)
            continue
        yield (value, line)


def parse_message(line: bytes) -> Message | BadLine:
    """One line (or a WebSocket frame's text) as a message, or the BadLine it is."""
    try:
        return (parse_line(line), line)
    except RpcError as exc:
        whole = isinstance(exc.data, dict)
        msg_id = exc.data.get("id") if whole else None
        return BadLine(exc, line[:BAD_LINE_SHOWN], msg_id, whole)
