"""The lifecycle of the sessions on one connection: session/new (registered before the
agent's next message is routed), load and resume of stored sessions (replayed from the store,
then attached), list, close and delete."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner import served
from acpctl.runner.attach import Attacher, with_note
from acpctl.runner.backends import Backend
from acpctl.runner.endpoint import LineOutput
from acpctl.runner.recorder import Recorder
from acpctl.runner.session import SessionRecord, SessionTable
from acpctl.store.sessions import CorruptSession, SessionStore, valid_session_id


class SessionLifecycle:
    def __init__(
        self,
        backend: Backend,
        store: SessionStore,
        recorder: Recorder,
        sessions: SessionTable,
        attacher: Attacher,
        out: LineOutput,
        log: logging.Logger,
        ensure_agent: Callable[[], Awaitable[None]],
    ) -> None:
        self.backend = backend
        self.store = store
        self.recorder = recorder
        self.sessions = sessions
        self.attacher = attacher
        self.out = out
        self.log = log
        self.ensure_agent = ensure_agent

    async def new(self, params: JsonObject) -> JsonObject:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(acp.INVALID_PARAMS, "cwd must be an absolute path")
        await self.ensure_agent()
        attach_params = _attach_params(params)

        def register(response: JsonObject) -> None:
            # Runs in the agent's read loop, before the agent's next message is routed,
            # so updates sent right after the response already find their session.
            result = response.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                return
            agent_id = result["sessionId"]
            client_id = agent_id
            if (
                not valid_session_id(agent_id)
                or self.store.exists(agent_id)
                or self.sessions.get(agent_id) is not None
            ):
                client_id = uuid.uuid4().hex
            extra = params.get("additionalDirectories")
            meta, writer = self.recorder.create(
                client_id, agent_id, cwd, list(extra) if isinstance(extra, list) else []
            )
            self.sessions.add(
                SessionRecord(
                    meta=meta,
                    writer=writer,
                    attach_params=attach_params,
                    generation=self.backend.generation,
                )
            )
            if client_id != agent_id:
                response["result"] = {**result, "sessionId": client_id}

        return await self.backend.call(acp.SESSION_NEW, params, on_response=register)

    async def load(self, params: JsonObject) -> JsonObject:
        return await self._reopen(params, replay=True)

    async def resume(self, params: JsonObject) -> JsonObject:
        return await self._reopen(params, replay=False)

    async def _reopen(self, params: JsonObject, replay: bool) -> JsonObject:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            raise RpcError(acp.INVALID_PARAMS, f"invalid session id {session_id!r}")
        record = self.sessions.get(session_id)
        if record is None:
            if not self.store.exists(session_id):
                raise RpcError(
                    acp.RESOURCE_NOT_FOUND,
                    f"session not found: {session_id}",
                    {"sessionId": session_id},
                )
            try:
                meta, writer = self.recorder.reopen(session_id)
            except (CorruptSession, OSError) as exc:
                raise RpcError(
                    acp.INTERNAL_ERROR, f"session {session_id} cannot be opened: {exc}"
                ) from exc
            record = SessionRecord(meta=meta, writer=writer)
            self.sessions.add(record)
        record.attach_params = _attach_params({"cwd": record.meta.cwd, **params})
        await self.ensure_agent()
        if replay:
            await served.replay(self.store, record.id, self.out)
        async with record.lock:
            result, note = await self.attacher.attach(record)
        return jsonrpc.result(None, with_note(result, note))

    async def list(self, params: JsonObject) -> JsonObject:
        return jsonrpc.result(None, served.list_page(self.store, params))

    async def close(self, params: JsonObject) -> JsonObject:
        session_id = params.get("sessionId")
        record = self.sessions.get(session_id)
        if record is None:
            if isinstance(session_id, str) and self.store.exists(session_id):
                return jsonrpc.result(None, {})
            raise RpcError(
                acp.RESOURCE_NOT_FOUND,
                f"session not found: {session_id}",
                {"sessionId": session_id},
            )
        await self._agent_session_call(record, "close", acp.SESSION_CLOSE)
        self.forget(record)
        return jsonrpc.result(None, {})

    async def delete(self, params: JsonObject) -> JsonObject:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            return jsonrpc.result(None, {})  # unknown sessions: succeed silently (ACP)
        record = self.sessions.get(session_id)
        if record is not None:
            await self._agent_session_call(record, "delete", acp.SESSION_DELETE)
            self.sessions.remove(record)
            self.recorder.close(record)
        self.store.delete(session_id)
        return jsonrpc.result(None, {})

    def forget(self, record: SessionRecord) -> None:
        self.sessions.remove(record)
        self.recorder.close(record)
        self.recorder.save(record, touch=False)

    async def _agent_session_call(
        self, record: SessionRecord, capability: str, method: str
    ) -> None:
        """close/delete on the agent's side too, when it is attached and supports it."""
        session_caps = self.backend.agent_capabilities.get("sessionCapabilities")
        if (
            record.generation == self.backend.generation
            and self.backend.alive
            and isinstance(session_caps, dict)
            and isinstance(session_caps.get(capability), dict)
        ):
            response = await self.backend.call(method, {"sessionId": record.agent_session_id})
            if "error" in response:
                self.log.info(
                    "agent %s of session %s failed: %s", method, record.id, response["error"]
                )


def _attach_params(params: JsonObject) -> JsonObject:
    attach: JsonObject = {"cwd": params.get("cwd"), "mcpServers": params.get("mcpServers") or []}
    if isinstance(params.get("additionalDirectories"), list):
        attach["additionalDirectories"] = params["additionalDirectories"]
    return attach
