"""The link: `run --acp` through a session host, this machine's or a remote one. The editor
speaks stdio to it, as to any agent; it keeps one logical connection to the host over
transports (remote/transport.py) that may drop, and hides every drop it can. This module is
its I/O: dialling with jittered backoff, reading the editor and the transport, setting a new
connection up, the outage limit. What is sent, owed and sent again is the protocol state's
(remote/link_state.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import jsonrpc
from acpctl.jsonrpc.framing import read_lines
from acpctl.jsonrpc.streams import Lines
from acpctl.remote.link_sessions import Reload
from acpctl.remote.link_state import HOST_STOPPED, LinkState
from acpctl.remote.transport import (
    LinkDown,
    LinkRefused,
    NoSuchHost,
    ResumePoint,
    ResumeRefused,
    Transport,
)

FIRST_CONNECT_LIMIT_S = 20.0  # before the link was ever up, the editor is not kept waiting
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 5.0
# A link that drops within STABLE_S of coming up, with nothing from the host meanwhile,
# more than QUICK_DROPS times in a row, keeps its back-off: a peer that fails the same way
# at once each time (an endless SSE line, a bad answer) is dialled ever more slowly, not in
# a loop. One that stayed up longer, or carried a message, is dialled again at once (a
# flaky network's cuts), and so is the first few of a run of quick drops.
STABLE_S = 10.0
QUICK_DROPS = 3
REOPEN_TIMEOUT_S = 60.0

Dial = Callable[[ResumePoint | None], Awaitable[Transport]]


class Link:
    def __init__(
        self,
        describe: str,
        dial: Dial,
        output: Lines,
        log: logging.Logger,
        outage_limit_s: float,
    ) -> None:
        self.state = LinkState(describe, log)
        self._dial = dial
        self._output = output
        self._log = log
        self._limit = outage_limit_s
        self._transport: Transport | None = None
        self._carrying: asyncio.Future[None] | None = None  # reading the transport
        self._resume_from: ResumePoint | None = None
        self._wake = asyncio.Event()  # the editor sent something
        self._editor_done = asyncio.Event()
        self._up_at: float | None = None  # monotonic: when the transport last came up
        self._carried = False  # a message from the host came since then
        self._quick_drops = 0  # drops in a row within STABLE_S of coming up, carrying nothing

    async def run(self, editor: asyncio.StreamReader) -> int:
        """Until the editor goes (0), or the host that said it stops is not back within the
        outage limit (1)."""
        reading = asyncio.ensure_future(self._read_editor(editor))
        try:
            while not self._editor_done.is_set():
                transport = await self._connect()
                if transport is None and self.state.stopping is not None:
                    self._log.warning(
                        "%s, and no host came back in %g s: leaving", HOST_STOPPED, self._limit
                    )
                    return 1
                if transport is None:  # given up: until the editor sends something
                    await _first_of(self._wake.wait(), self._editor_done.wait())
                    self._wake.clear()
                    continue
                await self._carry(transport)
        finally:
            reading.cancel()
            if self._transport is not None:
                await self._transport.close(leaving=True)
            await self._output.drain()
        return 0

    async def _read_editor(self, editor: asyncio.StreamReader) -> None:
        try:
            async for lines in read_lines(editor):
                for line in lines:
                    if line is not None and line.strip() and self._editor_sent(line):
                        self._wake.set()
                await self._flush()
                await self._output.drain()
        finally:
            self._editor_done.set()
            self._wake.set()

    def _editor_sent(self, line: bytes) -> bool:
        try:
            return self.state.editor_sent(line)
        except Exception:  # a message the state mishandles is lost, never the link
            self._log.exception("the link could not take a message from the editor")
            return False

    async def _flush(self) -> None:
        """What the state has for the editor and the host, written."""
        state = self.state
        self._write_editor()
        while state.to_host:
            texts, state.to_host = state.to_host, []
            for text in texts:
                await self._send(text)

    async def _send(self, text: str) -> None:
        if self._transport is not None:
            with contextlib.suppress(LinkDown):  # the reader sees the drop and reconnects
                await self._transport.send(text)

    async def _connect(self) -> Transport | None:
        """A transport, live; None when the link is given up (the outage limit passed, or
        the host refused in a way no retry cures)."""
        quick = self._up_at is not None and time.monotonic() - self._up_at < STABLE_S
        quick = quick and not self._carried
        self._quick_drops = self._quick_drops + 1 if quick else 0
        attempt = max(self._quick_drops - QUICK_DROPS, 0)
        if attempt and await self._backed_off(attempt - 1):
            return None
        while not self._editor_done.is_set():
            try:
                transport = await self._dial(self._resume_from)
            except ResumeRefused as exc:
                self._log.info("the host could not resume the connection (%s): a new one", exc)
                self._resume_from = None
                continue
            except (LinkRefused, NoSuchHost) as exc:
                self._went_down(str(exc))
                if isinstance(exc, LinkRefused) or not self.state.connection:
                    self._give_up(str(exc))
                    return None
            except (LinkDown, OSError, asyncio.TimeoutError) as exc:
                self._went_down(str(exc) or type(exc).__name__)
            else:
                if await self._came_up(transport):
                    self._up_at, self._carried = time.monotonic(), False
                    return transport
                continue
            if self.state.past(self._limit, FIRST_CONNECT_LIMIT_S):
                self._give_up(self.state.down_reason)
                return None
            if await self._backed_off(attempt):
                return None
            attempt += 1
        return None

    async def _backed_off(self, attempt: int) -> bool:
        """Wait the `attempt`th back-off (jittered, doubling up to BACKOFF_MAX_S); True when
        the editor went meanwhile."""
        import random  # here: a link that never drops never needs it

        delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**attempt) * random.uniform(0.5, 1.5)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._editor_done.wait(), delay)
        return self._editor_done.is_set()

    def _write_editor(self) -> None:
        if self.state.to_editor:
            lines, self.state.to_editor = self.state.to_editor, []
            self._output.write(b"".join(lines))

    def _went_down(self, reason: str) -> None:
        self.state.went_down(reason)
        self._write_editor()

    def _give_up(self, reason: str) -> None:
        self.state.give_up(reason)
        self._write_editor()

    async def _came_up(self, transport: Transport) -> bool:
        """Make `transport` the link's, a new connection set up as the editor had it;
        False when it dropped while being set up (the caller dials again)."""
        self._transport = transport
        resumed = transport.resumed
        reloads = self.state.came_up(resumed)
        carrying = self._carrying = asyncio.ensure_future(self._read(transport))
        try:
            await self._flush()
            for step in reloads:
                await self._reload(step, transport, carrying)
        except (LinkDown, asyncio.TimeoutError, ConnectionError) as exc:
            self._log.info("the link dropped again while reconnecting: %s", exc)
            carrying.cancel()
            await transport.close(leaving=False)
            # A connection set up halfway is not resumed: the next one is set up whole.
            self._resume_from = transport.resume_point() if resumed else None
            self._transport = None
            self._went_down(str(exc) or type(exc).__name__)
            return False
        self.state.set_up()
        await self._flush()
        return True

    async def _reload(
        self, step: Reload, transport: Transport, carrying: asyncio.Future[None]
    ) -> None:
        """One request of a new connection's setup, sent and answered (the link's own, in
        the state's pending table); raises LinkDown when the transport drops first."""
        msg_id, answer = self.state.own.register(step.method)
        self.state.reloading(step)
        try:
            await transport.send(json.dumps(jsonrpc.request(msg_id, step.method, step.params)))
            await asyncio.wait_for(
                _first_of(asyncio.shield(answer), asyncio.shield(carrying)), REOPEN_TIMEOUT_S
            )
            if not answer.done():
                raise LinkDown("dropped")
        finally:
            self.state.reloaded(step, answer.result() if answer.done() else None)
            if not answer.done():
                self.state.own.resolve(msg_id, {})  # out of the table: nobody waits for it

    async def _carry(self, transport: Transport) -> None:
        """Until the transport drops or the editor goes."""
        assert self._carrying is not None
        await _first_of(asyncio.shield(self._carrying), self._editor_done.wait())
        if self._editor_done.is_set():
            return
        self._transport = None
        self._resume_from = transport.resume_point() if self.state.resumable else None
        reason = transport.close_reason
        await transport.close(leaving=not self.state.resumable)
        self._went_down(reason)

    async def _read(self, transport: Transport) -> None:
        while (text := await transport.receive()) is not None:
            self._carried = True
            try:
                cursor = self.state.host_sent(text)
            except Exception:  # a message the state mishandles is lost, never the link
                self._log.exception("the link could not take a message from the host")
                continue
            if cursor is not None:
                transport.took(cursor)
            self._write_editor()
            if self.state.to_host:
                await self._flush()
            await self._output.room()


async def _first_of(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
