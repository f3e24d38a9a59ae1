"""A client on a WebSocket, as a channel (acpctl.jsonrpc.channel): one JSON-RPC message a
text frame, both ways (ACP's remote transport). What the server writes is queued and sent
by one task, so the server never waits on a client's network; a client that falls too far
behind is disconnected rather than buffered without bound."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import WSMsgType, web

from acpctl.jsonrpc.framing import BadLine, Message, parse_message
from acpctl.jsonrpc.messages import encode

# What may wait for a client: past HIGH_WATER the server's drain waits (the agent's output
# is read no faster than the slowest client takes it); past MAX_BEHIND the client is cut off.
HIGH_WATER = 1 << 20
MAX_BEHIND = 64 << 20
TOO_SLOW = 1013  # "try again later": the client did not keep up


class WebSocketChannel:
    def __init__(self, socket: web.WebSocketResponse, log: logging.Logger) -> None:
        self._socket = socket
        self._log = log
        self._queue: collections.deque[str] = collections.deque()
        self._queued = 0  # bytes waiting
        self._wake = asyncio.Event()
        self._taken = asyncio.Event()  # the queue shrank below HIGH_WATER
        self._closed = False
        self._cut = False  # fell too far behind: closed without sending the rest
        self._sender = asyncio.ensure_future(self._send_all())

    def send(self, message: Any) -> None:
        self.write(encode(message))

    def write(self, data: bytes) -> None:
        if self._closed:
            return
        for line in data.split(b"\n"):
            if line:
                self._queue.append(line.decode("utf-8", "replace"))
                self._queued += len(line)
        if self._queued > MAX_BEHIND:
            self._log.warning("a client fell %d MiB behind; disconnecting it", MAX_BEHIND >> 20)
            self._closed = self._cut = True
            self._queue.clear()
            self._queued = 0
        self._wake.set()

    async def drain(self) -> None:
        while self._queued > HIGH_WATER and not self._closed:
            self._taken.clear()
            await self._taken.wait()

    async def _send_all(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._cut:
                    await self._socket.close(code=TOO_SLOW, message=b"too slow")
                    return
                while self._queue:
                    text = self._queue.popleft()
                    self._queued -= len(text)
                    if self._queued <= HIGH_WATER:
                        self._taken.set()
                    await self._socket.send_str(text)
                if self._closed:
                    return
        except (ConnectionError, RuntimeError):  # the client went away mid-send
            self._closed = True
        finally:
            self._taken.set()

    async def incoming(self) -> AsyncIterator[list[Message | BadLine]]:
        async for frame in self._socket:
            if frame.type == WSMsgType.TEXT:
                yield [parse_message(frame.data.encode())]
            elif frame.type == WSMsgType.ERROR:
                self._log.info("a client's WebSocket failed: %s", self._socket.exception())
                return
            # Binary frames carry nothing in ACP: ignored, as the SDKs do.

    def close(self) -> None:
        """Send what is queued, then close the socket."""
        if not self._closed:
            self._closed = True
            self._wake.set()

    async def closed(self) -> None:
        """Until what was queued is sent and the socket is closed."""
        self.close()
        with contextlib.suppress(Exception):
            await self._sender
        await self._socket.close()
