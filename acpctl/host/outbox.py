"""What a logical connection sends, queued for its transports: each text with its cursor,
taken by the one reader a transport holds (a WebSocket, a Streamable HTTP stream, the unix
socket), with a bound on how far behind a reader may fall."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple


class Backlog(NamedTuple):
    """What a reader is sent first: (cursor, text) in order, of what was sent through
    the cursor `through`."""

    messages: list[tuple[int, str]]
    through: int


@dataclass(eq=False)
class Reader:
    """A transport reading one stream (or, for a WebSocket, all of them)."""

    stream: str | None
    push: Callable[[int, str], None]
    drain: Callable[[], Any]  # an awaitable: until the transport has taken enough


class Outbox:
    """What waits for one transport (a WebSocket, an SSE stream): the connection pushes,
    the transport's writer takes. Past HIGH_WATER the server's drain waits (the agent is read
    no faster than the slowest client takes it); past MAX_BEHIND the transport is cut off
    (its connection can resume) rather than buffered without bound."""

    HIGH_WATER = 1 << 20
    MAX_BEHIND = 64 << 20

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._items: collections.deque[tuple[int, str]] = collections.deque()
        self._queued = 0  # bytes waiting
        self._ready = asyncio.Event()
        self._taken = asyncio.Event()
        self.closed = False
        self.cut = False  # fell too far behind

    def reader(self, stream: str | None) -> Reader:
        return Reader(stream, self.push, self.drain)

    def push(self, cursor: int, text: str) -> None:
        if self.closed:
            return
        self._items.append((cursor, text))
        self._queued += len(text)
        if self._queued > self.MAX_BEHIND:
            self._log.warning(
                "a client fell %d MiB behind; cutting its transport off", self.MAX_BEHIND >> 20
            )
            self.cut = True
            self._items.clear()
            self.close()
        self._ready.set()

    async def drain(self) -> None:
        while self._queued > self.HIGH_WATER and not self.closed:
            self._taken.clear()
            await self._taken.wait()

    async def take(self, timeout: float | None = None) -> list[tuple[int, str]] | None:
        """What waits, once something does: [] when `timeout` passed first, None once the
        outbox is closed and empty."""
        if not self._items and not self.closed:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)
        self._ready.clear()
        if not self._items:
            return None if self.closed else []
        items = list(self._items)
        self._items.clear()
        self._queued = 0
        self._taken.set()
        return items

    def close(self) -> None:
        """Nothing more comes in; what waits is still taken."""
        self.closed = True
        self._ready.set()
        self._taken.set()
