"""Prompt turns: one at a time per session, the later ones waiting first in first out
(unless the agent queues prompts itself); a session/cancel ends the running one and the
waiting ones, and settles the session's open permission dialogs; a session that closes
has its turns ended first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner import served
from acpctl.runner.attach import Attacher
from acpctl.runner.backends import Backend
from acpctl.runner.endpoint import LineOutput
from acpctl.runner.idmap import IdMap
from acpctl.runner.incidents import Incidents
from acpctl.runner.recorder import Recorder
from acpctl.runner.session import SessionRecord

# How long a cancelled turn may take to end before a closing session ends it as cancelled.
CLOSE_GRACE_S = 5.0
# How long a running prompt may go without a word from the agent before the log says so
# (config.toml's silence_warning_s; 0 turns the watchdog off).
SILENCE_WARNING_S = 30.0


class Turns:
    def __init__(
        self,
        backend: Backend,
        attacher: Attacher,
        recorder: Recorder,
        ids: IdMap,
        out: LineOutput,
        log: logging.Logger,
        incidents: Incidents,
        silence_s: float = SILENCE_WARNING_S,
    ) -> None:
        self.backend = backend
        self.incidents = incidents
        self.silence_s = silence_s
        self.attacher = attacher
        self.recorder = recorder
        self.ids = ids
        self.out = out
        self.log = log
        # Prompts waiting their turn, by the editor's request id: a $/cancel_request for
        # one ends it there (the agent never saw it).
        self.waiting: dict[tuple[bool, Any], asyncio.Future[None]] = {}

    async def prompt(
        self, record: SessionRecord, params: JsonObject, prompt: list[Any], msg_id: Any
    ) -> JsonObject:
        """One turn, answered with the agent's response (or `cancelled` when a cancel came
        while it waited its turn)."""
        cancels = record.cancels
        record.active += 1
        record.idle.clear()
        try:
            if served.queues_prompts(self.backend.agent_capabilities):
                return await self._run(record, params, prompt, msg_id)
            if not await self._my_turn(record, msg_id):
                return jsonrpc.error(None, acp.REQUEST_CANCELLED, "request cancelled")
            try:
                if record.cancels != cancels:
                    return jsonrpc.result(None, {"stopReason": acp.CANCELLED})
                return await self._run(record, params, prompt, msg_id)
            finally:
                record.turn.release()
        finally:
            record.active -= 1
            if not record.active:
                record.idle.set()

    async def _my_turn(self, record: SessionRecord, msg_id: Any) -> bool:
        """Wait for the session's turn (first in first out); False when the editor
        withdrew the request meanwhile."""
        if not record.turn.locked():
            await record.turn.acquire()
            return True
        key = jsonrpc.id_key(msg_id)
        withdrawn = self.waiting[key] = asyncio.get_running_loop().create_future()
        acquiring = asyncio.ensure_future(record.turn.acquire())
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

    def withdraw(self, editor_id: Any) -> bool:
        """The editor cancelled a prompt still waiting its turn: it ends now."""
        try:
            withdrawn = self.waiting.get(jsonrpc.id_key(editor_id))
        except TypeError:
            return False
        if withdrawn is None or withdrawn.done():
            return False
        withdrawn.set_result(None)
        return True

    async def _run(
        self, record: SessionRecord, params: JsonObject, prompt: list[Any], msg_id: Any
    ) -> JsonObject:
        async with record.lock:
            await self.attacher.attach(record)
            self.recorder.prompt(record, prompt)
            future = self.backend.call(acp.SESSION_PROMPT, record.to_agent(params))
        self.ids.forwarded(msg_id, future, self.backend.request_id_of(future))
        record.prompts.add(future)
        try:
            silent = await self._watch(record, future)
            response = future.result()
        except asyncio.CancelledError:
            future.cancel()  # as `await future` would: the turn is abandoned with us
            raise
        finally:
            record.prompts.discard(future)
        self.recorder.turn_end(record, response)
        if silent:
            result = response.get("result")
            stop = result.get("stopReason") if isinstance(result, dict) else "error"
            self.incidents.add("silent_turn_end", session=record.id, stopReason=stop)
        return response

    async def _watch(self, record: SessionRecord, future: asyncio.Future[JsonObject]) -> bool:
        """Wait for the turn's answer; each time the agent has said nothing about the
        session for silence_s, say so in the log (an editor shows it in its agent log).
        Whether it went silent."""
        if self.silence_s <= 0:
            await asyncio.wait({future})
            return False
        record.heard = time.monotonic()
        deadline = record.heard + self.silence_s
        silent = False
        while not future.done():
            await asyncio.wait({future}, timeout=max(deadline - time.monotonic(), 0))
            if future.done():
                break
            quiet = time.monotonic() - record.heard
            if quiet < self.silence_s:  # it spoke meanwhile: wait from then
                deadline = record.heard + self.silence_s
                continue
            silent = True
            deadline = time.monotonic() + self.silence_s
            said = self.incidents.silence(record.id, record.agent_session_id or "", quiet)
            self.log.warning(
                "the agent has said nothing for %.0f s in session %s%s; still waiting "
                "(the editor's stop button cancels)",
                quiet,
                record.id,
                f"; its own log says: {said}" if said else "",
            )
        return silent

    async def cancel(self, record: SessionRecord, params: JsonObject) -> None:
        record.cancels += 1  # the prompts waiting their turn end as cancelled
        async with record.lock:
            if record.generation == self.backend.generation and self.backend.alive:
                self.backend.notify(acp.SESSION_CANCEL, record.to_agent(params))
        # Permission requests of this session still open are settled as cancelled, and the
        # editor is told to drop its dialog.
        cancelled = jsonrpc.result(None, {"outcome": {"outcome": acp.CANCELLED}})
        dialogs = self.ids.waiting(
            lambda request: request.session is record and request.method == acp.REQUEST_PERMISSION
        )
        for editor_id in dialogs:
            request = self.ids.settle(editor_id, cancelled)
            if request is None:
                continue
            self.recorder.permission_outcome(record, cancelled)
            if request.generation == self.backend.generation:
                self.backend.send({**cancelled, "id": request.agent_id})
            self.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))

    async def end(self, record: SessionRecord) -> None:
        """Before a session closes: cancel its running and waiting prompts and wait for
        them to answer; an agent that does not end the turn in time has it ended for it."""
        if record.active == 0:
            return
        await self.cancel(record, {"sessionId": record.id})
        try:
            await asyncio.wait_for(record.idle.wait(), CLOSE_GRACE_S)
        except asyncio.TimeoutError:
            self.log.warning("session %s: the agent did not end the cancelled turn", record.id)
            for future in list(record.prompts):
                if not future.done():
                    future.set_result(jsonrpc.result(None, {"stopReason": acp.CANCELLED}))
            with contextlib.suppress(asyncio.TimeoutError):  # one stuck attaching
                await asyncio.wait_for(record.idle.wait(), CLOSE_GRACE_S)
