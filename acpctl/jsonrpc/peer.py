"""One JSON-RPC peer over a byte stream: requests out through the pending table, the
stream's messages read by the one read loop, responses matched to their requests, the rest
handed to the owner, and every request still waiting settled when the stream ends.

Every connection acpctl holds (the agent behind `run --acp`, pi's RPC child, the terminal
client's `run --acp`, doctor's probes, the demo agent's editor) is one of these, so each
decides the same way what a response, an unknown id, a line that is not a message and the
end of the stream get.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

from acpctl.jsonrpc.framing import BadLine, Batch
from acpctl.jsonrpc.messages import (
    INTERNAL_ERROR,
    JsonObject,
    ResponseHook,
    encode,
    error,
    notification,
    request,
)
from acpctl.jsonrpc.pending import Pending, PendingRequests

IdT = TypeVar("IdT", int, str)
OnMessage = Callable[[Any, bytes], None]
OnBadLine = Callable[[BadLine], None]
OnBatchEnd = Callable[[], Awaitable[None]]
# Awaited when the stream ends: the answer every request still waiting gets.
Closed = Callable[[], Awaitable[Callable[[Pending], JsonObject]]]
LOG = logging.getLogger(__name__)


def is_response(message: JsonObject) -> bool:
    """A JSON-RPC response: an object with no method (pi's RPC mode says `type`)."""
    return "method" not in message


class Peer(Generic[IdT]):
    def __init__(
        self,
        write: Callable[[bytes], None],
        ids: Iterator[IdT] | None = None,
        response: Callable[[JsonObject], bool] = is_response,
    ) -> None:
        self._write = write
        self._is_response = response
        self.pending: PendingRequests[IdT] = PendingRequests(
            ids if ids is not None else itertools.count(1)  # type: ignore[arg-type]
        )
        # Once the stream has ended: the answer every request gets. A call made after that
        # would otherwise wait for a response nobody will read (forever).
        self._ended: Callable[[Pending], JsonObject] | None = None

    def call(
        self, method: str, params: Any = None, on_response: ResponseHook | None = None
    ) -> asyncio.Future[JsonObject]:
        """Send a JSON-RPC request; the future resolves to the peer's whole response.

        `on_response` runs in the read loop as the response is read, before the peer's next
        message is routed."""
        msg_id, future = self.pending.register(method, on_response)
        self._send_request(request(msg_id, method, params))
        return future

    def command(self, kind: str, fields: JsonObject) -> asyncio.Future[JsonObject]:
        """A request in a message shape of the peer's own (pi's `{"id", "type", ...}`)."""
        msg_id, future = self.pending.register(kind)
        self._send_request({"id": msg_id, "type": kind, **fields})
        return future

    def _send_request(self, message: JsonObject) -> None:
        """Sent, or (the stream has ended) answered at once with the ended answer."""
        if self._ended is not None:
            self.pending.fail_all(self._ended)
        else:
            self._write(encode(message))

    def notify(self, method: str, params: Any = None) -> None:
        self._write(encode(notification(method, params)))

    def send(self, message: Any) -> None:
        self._write(encode(message))

    def id_of(self, future: asyncio.Future[JsonObject]) -> IdT | None:
        return self.pending.id_of(future)

    def _take(self, message: Any, line: bytes, on_message: OnMessage) -> None:
        if (
            isinstance(message, dict)
            and self._is_response(message)
            and self.pending.resolve(message.get("id"), message) is not None
        ):
            return
        try:
            on_message(message, line)
        except Exception:  # a bug must not stop the reader
            LOG.exception("internal error routing a peer's message")

    async def read(
        self,
        incoming: AsyncIterator[Batch],
        on_message: OnMessage,
        on_bad_line: OnBadLine | None = None,
        on_batch_end: OnBatchEnd | None = None,
        closed: Closed | None = None,
    ) -> None:
        """Read `incoming` (read_messages over a stream, or a channel's) until it ends.
        A response settles its request; every other message
        (an unknown response too) goes to `on_message` with its line; a bad line to
        `on_bad_line`. When the stream ends, `closed()` gives the answer each request still
        waiting gets. However reading ends (an error, a cancellation), none stays waiting, and a
        request made after it gets that answer at once."""
        answer: Callable[[Pending], JsonObject] = _closed
        try:
            async for batch in incoming:
                for item in batch:
                    if isinstance(item, BadLine):
                        if on_bad_line is not None:
                            on_bad_line(item)
                        continue
                    message, line = item
                    if isinstance(message, list) and message:
                        # A batch (JSON-RPC 2.0 allows them both ways): its members in
                        # order, each with a line of its own.
                        for member in message:
                            self._take(member, encode(member)[:-1], on_message)
                    else:
                        self._take(message, line, on_message)
                if on_batch_end is not None:
                    await on_batch_end()
            if closed is not None:
                answer = await closed()
        finally:
            self._ended = answer
            self.pending.fail_all(answer)


def _closed(entry: Pending) -> JsonObject:
    return error(None, INTERNAL_ERROR, f"the connection closed during {entry.method}")
