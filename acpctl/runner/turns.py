"""Prompt turns: one at a time per session, the later ones waiting first in first out
(unless the agent queues prompts itself); a session/cancel ends the running one and the
waiting ones, and settles the session's open permission dialogs; a session that closes
has its turns ended first."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.attach import Attacher
from acpctl.runner.clients import RequestKey
from acpctl.runner.context import Connection
from acpctl.runner.questions import Questions
from acpctl.runner.replies import ReadLoopReply
from acpctl.runner.session import SessionRecord

# How long a cancelled turn may take to end before a closing session ends it as cancelled.
CLOSE_GRACE_S = 5.0
# How long an agent may take to end a turn it was told to cancel: past it, the turn ends
# for its clients as cancelled, said so (an agent stopped by SIGSTOP, or stuck, leaves no
# one waiting); what the agent answers later is dropped.
CANCEL_DEADLINE_S = 10.0
IGNORED_CANCEL = (
    "the agent did not end the turn within {seconds:g} s of its cancel: acpctl ended it for "
    "its clients (the agent may be stopped or stuck: acpctl host status, acpctl ps)"
)


class TurnQueue:
    """One session's prompts: the running one and those waiting their turn."""

    def __init__(self) -> None:
        # Prompts wait here, first in first out, unless the agent queues them itself.
        self.turn = asyncio.Lock()
        self.prompts: set[asyncio.Future[JsonObject]] = set()  # at the agent
        self.cancels = 0  # bumped by session/cancel: prompts queued before it end cancelled
        self.active = 0  # prompts running or waiting
        self.idle = asyncio.Event()  # set while active == 0
        self.idle.set()


class Turns:
    def __init__(self, conn: Connection, attacher: Attacher, questions: Questions) -> None:
        self.conn = conn
        self.attacher = attacher
        self.questions = questions
        # Each open session's queue, gone with its record.
        self._queues: weakref.WeakKeyDictionary[SessionRecord, TurnQueue] = (
            weakref.WeakKeyDictionary()
        )
        # Prompts waiting their turn, by the client's request id: a $/cancel_request for
        # one ends it there (the agent never saw it).
        self.waiting: dict[RequestKey, asyncio.Future[None]] = {}
        # Prompts at the agent, by their pending answer: a $/cancel_request for one names it.
        self.running: dict[asyncio.Future[JsonObject], SessionRecord] = {}
        self._settling: set[asyncio.Task[None]] = set()  # cancels' deadlines

    def queue(self, record: SessionRecord) -> TurnQueue:
        queue = self._queues.get(record)
        if queue is None:
            queue = self._queues[record] = TurnQueue()
        return queue

    async def prompt(
        self,
        record: SessionRecord,
        params: JsonObject,
        prompt: list[Any],
        key: RequestKey,
        msg_id: Any,
        reply: ReadLoopReply | None = None,
        message_id: str | None = None,
    ) -> JsonObject:
        """One turn, answered with the agent's response (or `cancelled` when a cancel came
        while it waited its turn); from the read loop when `reply` is given. `message_id`:
        the user's message's, as the session's other clients saw it, recorded with it."""
        queue = self.queue(record)
        cancels = queue.cancels

        async def run() -> JsonObject:
            return await self._run(record, queue, params, prompt, key, msg_id, reply, message_id)

        queue.active += 1
        queue.idle.clear()
        try:
            if self.conn.handshake.queues_prompts():
                return await run()
            if not await self._my_turn(queue, key):
                return jsonrpc.error(None, acp.REQUEST_CANCELLED, "request cancelled")
            try:
                if queue.cancels != cancels:
                    return jsonrpc.result(None, {"stopReason": acp.CANCELLED})
                return await run()
            finally:
                queue.turn.release()
        finally:
            queue.active -= 1
            if not queue.active:
                queue.idle.set()

    async def _my_turn(self, queue: TurnQueue, key: RequestKey) -> bool:
        """Wait for the session's turn (first in first out); False when the client
        withdrew the request meanwhile."""
        if not queue.turn.locked():
            await queue.turn.acquire()
            return True
        withdrawn = self.waiting[key] = asyncio.get_running_loop().create_future()
        acquiring = asyncio.ensure_future(queue.turn.acquire())
        try:
            await asyncio.wait({acquiring, withdrawn}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.waiting.pop(key, None)
        if acquiring.done():
            return True
        acquiring.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await acquiring
        return False

    def withdraw(self, key: RequestKey) -> bool:
        """The client cancelled a prompt still waiting its turn: it ends now."""
        withdrawn = self.waiting.get(key)
        if withdrawn is None or withdrawn.done():
            return False
        withdrawn.set_result(None)
        return True

    async def _run(
        self,
        record: SessionRecord,
        queue: TurnQueue,
        params: JsonObject,
        prompt: list[Any],
        key: RequestKey,
        msg_id: Any,
        reply: ReadLoopReply | None,
        message_id: str | None,
    ) -> JsonObject:
        conn = self.conn

        def ended(response: JsonObject) -> None:  # recorded before the editor sees it
            conn.recorder.turn_end(record, response)

        async with record.lock:
            await self.attacher.attach(record)
            conn.recorder.prompt(record, prompt, message_id)
            hook = reply.hook(ended) if reply is not None else ended
            future = conn.backend.call(acp.SESSION_PROMPT, record.to_agent(params), hook)
        conn.ids.forwarded(key, msg_id, future, conn.backend.request_id_of(future))
        queue.prompts.add(future)
        self.running[future] = record
        conn.sessions_changed()
        try:
            silent = await self._watch(record, future)
            response = future.result()
        except asyncio.CancelledError:
            future.cancel()  # as `await future` would: the turn is abandoned with us
            raise
        finally:
            queue.prompts.discard(future)
            self.running.pop(future, None)
            conn.sessions_changed()
        result = response.get("result")
        stop = result.get("stopReason") if isinstance(result, dict) else "error"
        if silent:
            conn.incidents.add("silent_turn_end", session=record.id, stopReason=stop)
        elif stop in (acp.END_TURN, acp.MAX_TOKENS):
            conn.incidents.worked()
        return response

    async def _watch(self, record: SessionRecord, future: asyncio.Future[JsonObject]) -> bool:
        """Wait for the turn's answer; each time the agent has said nothing about the
        session for silence_s, say so in the log (an editor shows it in its agent log).
        Whether it went silent."""
        silence_s = self.conn.silence_s
        if silence_s <= 0:
            await asyncio.wait({future})
            return False
        record.heard = time.monotonic()
        deadline = record.heard + silence_s
        silent = False
        while not future.done():
            await asyncio.wait({future}, timeout=max(deadline - time.monotonic(), 0))
            if future.done():
                break
            quiet = time.monotonic() - record.heard
            if quiet < silence_s:  # it spoke meanwhile: wait from then
                deadline = record.heard + silence_s
                continue
            silent = True
            deadline = time.monotonic() + silence_s
            said = self.conn.incidents.silence(record.id, record.agent_session_id or "", quiet)
            self.conn.log.warning(
                "the agent has said nothing for %.0f s in session %s%s; still waiting "
                "(the editor's stop button cancels)",
                quiet,
                record.id,
                f"; its own log says: {said}" if said else "",
            )
        return silent

    def cancel_running(self, upstream: asyncio.Future[JsonObject]) -> bool:
        """The editor's $/cancel_request for a prompt at the agent: a session/cancel for
        its session, the standard way to end a turn (agents need not know
        $/cancel_request). The session's waiting prompts are left alone; an agent that
        queues prompts itself is sent the $/cancel_request instead, as session/cancel
        would end what it has queued too. Whether it was such a prompt."""
        record = self.running.get(upstream)
        if record is None or self.conn.handshake.queues_prompts():
            return False
        self._cancel_at_agent(record, {"sessionId": record.id})
        return True

    def _cancel_at_agent(self, record: SessionRecord, params: JsonObject) -> None:
        """session/cancel to the agent, when the session is attached to the one running."""
        backend = self.conn.backend
        if record.generation == backend.generation and backend.alive:
            backend.notify(acp.SESSION_CANCEL, record.to_agent(params))

    async def cancel(self, record: SessionRecord, params: JsonObject) -> None:
        queue = self.queue(record)
        queue.cancels += 1  # the prompts waiting their turn end as cancelled
        async with record.lock:
            self._cancel_at_agent(record, params)
        self.questions.cancel_open(record)
        running = [future for future in queue.prompts if not future.done()]
        if running:
            settling = asyncio.ensure_future(self._settle_ignored(record, running))
            self._settling.add(settling)
            settling.add_done_callback(self._settling.discard)

    async def _settle_ignored(
        self, record: SessionRecord, running: list[asyncio.Future[JsonObject]]
    ) -> None:
        """The turns a cancel was sent for, ended as cancelled for their clients when the
        agent has not ended them by the deadline."""
        await asyncio.wait(running, timeout=CANCEL_DEADLINE_S)
        left = [future for future in running if not future.done()]
        if not left:
            return
        said = IGNORED_CANCEL.format(seconds=CANCEL_DEADLINE_S)
        self.conn.log.warning("session %s: %s", record.id, said)
        ended = jsonrpc.result(
            None, {"stopReason": acp.CANCELLED, "_meta": {acp.ENDED_BY_ACPCTL_META: said}}
        )
        for future in left:
            self.conn.recorder.turn_end(record, ended)  # the history ends the turn too
            future.set_result(ended)

    async def end(self, record: SessionRecord) -> None:
        """Before a session closes: cancel its running and waiting prompts and wait for
        them to answer; an agent that does not end the turn in time has it ended for it."""
        queue = self.queue(record)
        if queue.active == 0:
            return
        await self.cancel(record, {"sessionId": record.id})
        try:
            await asyncio.wait_for(queue.idle.wait(), CLOSE_GRACE_S)
        except asyncio.TimeoutError:
            self.conn.log.warning("session %s: the agent did not end the cancelled turn", record.id)
            for future in list(queue.prompts):
                if not future.done():
                    future.set_result(jsonrpc.result(None, {"stopReason": acp.CANCELLED}))
            with contextlib.suppress(asyncio.TimeoutError):  # one stuck attaching
                await asyncio.wait_for(queue.idle.wait(), CLOSE_GRACE_S)
