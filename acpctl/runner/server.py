"""The coordinator of `acpctl run --acp`: routes every message between the editor's end
(`endpoint`) and the injected backend, by the session that owns it.

The path of one prompt, top to bottom:
  editor line → EditorEndpoint.serve → route_request → prompt(): the recorder writes the
  user's blocks, the backend sends session/prompt under its own id → the agent's updates
  arrive in on_agent_notification: recorded as their bytes, relayed to the editor as the
  same bytes → the agent's response resolves the backend's future → the recorder ends the
  turn (fsync) → the endpoint replies under the editor's id.
Everything else the server does not handle itself is relayed untouched, with the session
id mapped when it names one.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner import served
from acpctl.runner.attach import Attacher
from acpctl.runner.backends import Backend
from acpctl.runner.endpoint import Answer, EditorEndpoint, LineOutput
from acpctl.runner.idmap import IdMap, ReverseRequest
from acpctl.runner.lifecycle import SessionLifecycle
from acpctl.runner.recorder import Recorder
from acpctl.runner.runs import RunRecord
from acpctl.runner.session import SessionRecord, SessionTable
from acpctl.store.sessions import SessionStore

# How long in-flight requests may take to answer once the editor has gone or a signal came.
SHUTDOWN_GRACE_S = 2.0

Handler = Callable[[JsonObject], Awaitable[JsonObject]]


class AcpServer:
    def __init__(
        self,
        backend: Backend,
        store: SessionStore,
        recorder: Recorder,
        log: logging.Logger,
        output: LineOutput,
        run_record: RunRecord | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        self.recorder = recorder
        self.log = log
        self.out = output
        self.run_record = run_record
        self.debug = bool(os.environ.get("ACPCTL_DEBUG"))
        self.endpoint = EditorEndpoint(output, log, self.debug)
        self.endpoint.router = self
        self.sessions = SessionTable(self._update_run_record)
        self.ids = IdMap()
        self.attacher = Attacher(backend, self.sessions, recorder, log)
        self.lifecycle = SessionLifecycle(
            backend, store, recorder, self.sessions, self.attacher, output, log, self._ensure_agent
        )
        self._closed = False
        self.handlers: dict[str, Handler] = {
            acp.INITIALIZE: self.initialize,
            acp.AUTHENTICATE: self.authenticate,
            acp.SESSION_NEW: self.lifecycle.new,
            acp.SESSION_LOAD: self.lifecycle.load,
            acp.SESSION_RESUME: self.lifecycle.resume,
            acp.SESSION_LIST: self.lifecycle.list,
            acp.SESSION_CLOSE: self.lifecycle.close,
            acp.SESSION_DELETE: self.lifecycle.delete,
            acp.SESSION_PROMPT: self.prompt,
        }
        backend.connect(self)

    # == from the editor (Router) ======================================================

    def route_request(self, method: str, params: Any, msg_id: Any) -> Answer:
        if (
            method not in self.handlers
            and self.backend.alive
            and not (isinstance(params, dict) and "sessionId" in params)
        ):
            return self._relay_now(method, params, msg_id)
        return self._request(method, params, msg_id)

    def route_notification(self, method: str, params: Any) -> None:
        if method == acp.SESSION_CANCEL:
            self.endpoint.spawn(self.cancel(params))
        elif method == acp.CANCEL_REQUEST:
            self._cancel_request(params)
        elif not self.backend.alive:
            self.log.debug("dropped %s: the agent is not running", method)
        else:
            record = (
                self.sessions.get(params.get("sessionId")) if isinstance(params, dict) else None
            )
            self.backend.notify(method, record.to_agent(params) if record else params)

    def route_response(self, message: JsonObject) -> None:
        """The editor answered a request that came from the agent: send it back."""
        request = self.ids.settle(message.get("id"), message)
        if request is None:
            self.log.debug("editor answered unknown or settled request %r", message.get("id"))
            return
        if request.generation == self.backend.generation:  # else the agent that asked died
            self.backend.send({**message, "id": request.agent_id})

    def _relay_now(self, method: str, params: Any, msg_id: Any) -> asyncio.Future[JsonObject]:
        """A request that needs no session routing goes to the agent at once, without a
        task: this is the path whose round trip the relay benchmark measures."""
        upstream = self.backend.call(method, params)
        self.ids.forwarded(msg_id, upstream)
        answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        upstream.add_done_callback(
            lambda done: answer.set_result({**done.result(), "jsonrpc": "2.0", "id": msg_id})
        )
        return answer

    async def _request(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        try:
            handler = self.handlers.get(method)
            if handler is None:
                response = await self._forward(method, params, msg_id)
            elif not isinstance(params, dict):
                raise RpcError(acp.INVALID_PARAMS, f"{method} takes an object as params")
            else:
                response = await handler(params)
        except RpcError as exc:
            return jsonrpc.error_response(msg_id, exc)
        except Exception as exc:  # a bug must not take the connection down
            self.log.exception("internal error in %s", method)
            return jsonrpc.error(msg_id, acp.INTERNAL_ERROR, f"internal error: {exc}")
        return {**response, "jsonrpc": "2.0", "id": msg_id}

    async def _forward(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        """Any other request: relay it, mapping the session id if it names one."""
        await self._ensure_agent()
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            record = self._require(params)
            async with record.lock:
                await self.attacher.attach(record)
                future = self.backend.call(method, record.to_agent(params))
        else:
            future = self.backend.call(method, params)
        self.ids.forwarded(msg_id, future)
        return await future

    def _cancel_request(self, params: Any) -> None:
        """$/cancel_request from the editor names the editor's id: translate it."""
        if not isinstance(params, dict):
            return
        upstream = self.ids.upstream(params.get("requestId"))
        agent_id = self.backend.request_id_of(upstream) if upstream is not None else None
        if agent_id is not None:
            self.backend.notify(acp.CANCEL_REQUEST, {**params, "requestId": agent_id})

    # == connection-level methods ======================================================

    async def _ensure_agent(self) -> None:
        if self.backend.initialize_params is None:
            raise RpcError(acp.INVALID_REQUEST, "initialize must be called first")
        await self.backend.ensure_running()
        self._update_run_record()

    async def initialize(self, params: JsonObject) -> JsonObject:
        self.backend.initialize_params = params
        await self.backend.ensure_running()
        self._update_run_record()
        response = await self.backend.call(acp.INITIALIZE, params)
        result = response.get("result")
        if not isinstance(result, dict):
            return response
        capabilities = result.get("agentCapabilities")
        self.backend.agent_capabilities = (
            dict(capabilities) if isinstance(capabilities, dict) else {}
        )
        return {
            **response,
            "result": {**result, "agentCapabilities": served.capabilities(capabilities)},
        }

    async def authenticate(self, params: JsonObject) -> JsonObject:
        await self._ensure_agent()
        response = await self.backend.call(acp.AUTHENTICATE, params)
        if "result" in response:
            self.backend.authenticate_params = params  # replayed after a restart
        return response

    # == sessions ======================================================================

    def _require(self, params: JsonObject) -> SessionRecord:
        return self.sessions.require(params, self.store.exists)

    # == prompts and cancellation ======================================================

    async def prompt(self, params: JsonObject) -> JsonObject:
        record = self._require(params)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcError(acp.INVALID_PARAMS, "prompt must be an array of content blocks")
        if record.prompting:
            raise RpcError(
                acp.INVALID_REQUEST, f"a prompt is already running in session {record.id}"
            )
        record.prompt_future = asyncio.get_running_loop().create_future()  # claims the turn
        try:
            async with record.lock:
                await self.attacher.attach(record)
                self.recorder.prompt(record, prompt)
                record.prompt_future = self.backend.call(
                    acp.SESSION_PROMPT, record.to_agent(params)
                )
            response = await record.prompt_future
            self.recorder.turn_end(record, response)
            return response
        finally:
            record.prompt_future = None

    async def cancel(self, params: Any) -> None:
        record = self.sessions.get(params.get("sessionId")) if isinstance(params, dict) else None
        if record is None:
            return
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
            if request.generation == self.backend.generation:
                self.backend.send({**cancelled, "id": request.agent_id})
            self.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))

    # == from the agent (AgentEvents) ==================================================

    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None:
        params = message.get("params")
        method = message.get("method")
        if not isinstance(params, dict):
            self.out.write(raw + b"\n")
            return
        if method == acp.CANCEL_REQUEST:
            editor_id = self.ids.editor_id(params.get("requestId"))
            if editor_id is not None:
                self.out.send(jsonrpc.notification(method, {**params, "requestId": editor_id}))
            return
        agent_session = params.get("sessionId")
        record = self.sessions.of_agent(agent_session)
        if record is None:
            self.out.write(raw + b"\n")
            return
        if record.suppress_replay:
            return
        if method == acp.SESSION_UPDATE and isinstance(params.get("update"), dict):
            self.recorder.agent_update(record, params["update"], raw)
        if self.debug:
            self.log.debug("-> %s session=%s", method, record.id)
        if record.id == agent_session:
            self.out.write(raw + b"\n")
        else:
            self.out.send({**message, "params": {**params, "sessionId": record.id}})

    def on_agent_request(self, message: JsonObject, generation: int) -> None:
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        record = None
        if isinstance(agent_session, str):
            record = self.sessions.of_agent(agent_session)
            if record is None:
                self.backend.send(
                    jsonrpc.error(
                        message["id"], acp.RESOURCE_NOT_FOUND, f"unknown session {agent_session}"
                    )
                )
                return
        method = str(message.get("method"))
        editor_id = self.ids.to_editor(ReverseRequest(message["id"], generation, record, method))
        forwarded = {**message, "id": editor_id}
        if record is not None:
            assert isinstance(params, dict)
            forwarded["params"] = {**params, "sessionId": record.id}
        if self.debug:
            self.log.debug(
                "-> %s id=%s%s", method, editor_id, f" session={record.id}" if record else ""
            )
        self.out.send(forwarded)

    async def on_agent_batch_end(self) -> None:
        self.recorder.batch_end()
        await self.out.drain()

    def on_agent_exit(self, description: str, generation: int) -> None:
        # Requests the dead agent asked the editor are void; tell the editor.
        void = jsonrpc.error(None, acp.INTERNAL_ERROR, description)
        for editor_id in self.ids.waiting(lambda request: request.generation == generation):
            self.ids.settle(editor_id, void)
            self.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))
        self.log.warning("%s; it will be restarted on the next request", description)
        self._update_run_record()

    # == bookkeeping and shutdown ======================================================

    def _update_run_record(self) -> None:
        if self.run_record is not None:
            self.run_record.update(sessions=self.sessions.ids(), agentPid=self.backend.pid)

    async def shutdown(self) -> None:
        """Settle prompts as cancelled, end the agent's process tree, flush history."""
        if self._closed:
            return
        self._closed = True
        self.backend.settle_pending(
            acp.SESSION_PROMPT, jsonrpc.result(None, {"stopReason": acp.CANCELLED})
        )
        # Requests still in flight (the prompts just settled among them) get a moment to
        # record their end and answer; whatever still waits for the agent then is cut off.
        if self.endpoint.tasks:
            await asyncio.wait(set(self.endpoint.tasks), timeout=SHUTDOWN_GRACE_S)
        await self.out.drain()
        await self.backend.stop()
        for record in self.sessions:
            self.lifecycle.forget(record)
        for task in list(self.endpoint.tasks):
            task.cancel()
        await self.out.drain()
