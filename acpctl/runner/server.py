"""The editor-facing ACP server of `acpctl run --acp`.

It reads JSON-RPC from the editor, routes every message by the session that owns it, keeps
the history store, and relays everything else to the backend untouched. Ids are remapped
on each hop: requests to the agent get the backend's ids, the agent's requests get this
server's ids towards the editor, and each response goes back to the side that asked.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.backends import Backend
from acpctl.runner.backends.acp import AcpBackend, unwrap
from acpctl.runner.backends.pi_rpc import PiRpcBackend
from acpctl.runner.runlog import RunRecord
from acpctl.runner.session import SessionRecord
from acpctl.runner.supervisor import AgentProcess
from acpctl.store.sessions import (
    DiscardedHistory,
    HistoryWriter,
    SessionMeta,
    SessionStore,
    title_from_prompt,
    utc_now,
    valid_session_id,
)

LIST_PAGE_SIZE = 100
REPLAY_DRAIN_EVERY = 512
SESSION_CAPABILITIES_SERVED = ("list", "resume", "close", "delete")
CONTEXT_LOST_NOTE = "the agent's context for this session could not be restored"


@dataclass
class _ReverseRequest:
    """A request from the agent, forwarded to the editor under this server's id."""

    agent_id: Any
    generation: int
    session: SessionRecord | None
    method: str


class AcpServer:
    def __init__(self, agent_name: str, argv: list[str], env: dict[str, str],
                 store: SessionStore, log: logging.Logger, output: jsonrpc.Output,
                 record: RunRecord | None = None, history: bool = True,
                 agent_process: AgentProcess | None = None, kind: str = "acp") -> None:
        self.agent_name = agent_name
        self.history = history
        self.argv = argv
        self.store = store
        self.log = log
        self.out = output
        self.run_record = record
        self.debug = bool(os.environ.get("ACPCTL_DEBUG"))
        self.backend: Backend
        if kind == "pi-rpc":
            self.backend = PiRpcBackend(argv, env, log, self, store.root)
        else:
            self.backend = AcpBackend(argv, env, log, self, agent_process)
        self.sessions: dict[str, SessionRecord] = {}
        self.by_agent_id: dict[str, SessionRecord] = {}
        self.reverse: dict[int, _ReverseRequest] = {}
        self.reverse_by_agent_id: dict[Any, int] = {}
        self.forwarded: dict[str, asyncio.Future[JsonObject]] = {}  # editor id -> agent call
        self.dirty: set[HistoryWriter] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self._reverse_ids = iter(range(1, 1 << 62))
        self._closed = False
        self.handlers: dict[str, Callable[[JsonObject, Any], Awaitable[JsonObject]]] = {
            acp.INITIALIZE: self.initialize,
            acp.AUTHENTICATE: self.authenticate,
            acp.SESSION_NEW: self.new_session,
            acp.SESSION_LOAD: self.load_session,
            acp.SESSION_RESUME: self.resume_session,
            acp.SESSION_LIST: self.list_sessions,
            acp.SESSION_CLOSE: self.close_session,
            acp.SESSION_DELETE: self.delete_session,
            acp.SESSION_PROMPT: self.prompt,
        }

    # == the editor side =============================================================

    async def serve(self, reader: asyncio.StreamReader) -> None:
        async for batch in jsonrpc.read_batches(reader):
            for line in batch:
                if isinstance(line, jsonrpc.OversizedLine):
                    self.out.send(jsonrpc.error(None, acp.PARSE_ERROR,
                                                "parse error: message exceeds 64 MiB"))
                    continue
                self.dispatch_line(line)
            await self.out.drain()

    def dispatch_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = jsonrpc.parse_line(line)
        except RpcError as exc:
            self.out.send({"jsonrpc": "2.0", "id": None, "error": exc.to_error()})
            return
        if isinstance(message, list):
            self._spawn(self._batch(message))
            return
        response = self._dispatch(message)
        if isinstance(response, dict):
            self._reply(response)
        elif isinstance(response, asyncio.Future):
            response.add_done_callback(lambda done: self._reply(done.result()))
        elif response is not None:
            self._spawn(self._answer(response))

    async def _answer(self, pending: Awaitable[JsonObject | None]) -> None:
        response = await pending
        if response is not None:
            self._reply(response)

    def _reply(self, response: JsonObject) -> None:
        if self.debug:
            error = response.get("error")
            self.log.debug("-> response id=%s%s", response.get("id"),
                           f" error={error.get('code')}" if isinstance(error, dict) else "")
        self.out.send(response)

    async def _batch(self, messages: list[Any]) -> None:
        """JSON-RPC batches: answered as one array; an empty batch is invalid."""
        if not messages:
            self.out.send(jsonrpc.error(None, acp.INVALID_REQUEST, "invalid request: empty batch"))
            return
        results: list[JsonObject | None] = []
        for message in messages:
            response = self._dispatch(message)
            results.append(response if isinstance(response, dict) or response is None
                           else await response)
        answers = [r for r in results if r is not None]
        if answers:
            self.out.send(answers)

    def _dispatch(self, message: Any) -> JsonObject | Awaitable[JsonObject | None] | None:
        """Route one message. Returns an immediate response, an awaitable one, or None."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            msg_id = message.get("id") if isinstance(message, dict) else None
            return jsonrpc.error(msg_id if _is_id(msg_id) else None, acp.INVALID_REQUEST,
                                 "invalid request: expected a JSON-RPC 2.0 object")
        method = message.get("method")
        has_id = "id" in message
        msg_id = message.get("id")
        if has_id and not _is_id(msg_id):
            return jsonrpc.error(None, acp.INVALID_REQUEST, "invalid request: bad id")
        if method is None:
            if not has_id or ("result" not in message and "error" not in message):
                return jsonrpc.error(msg_id, acp.INVALID_REQUEST,
                                     "invalid request: no method, and not a response")
            self._editor_response(message)
            return None
        if not isinstance(method, str):
            return jsonrpc.error(msg_id if has_id else None, acp.INVALID_REQUEST,
                                 "invalid request: method must be a string")
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return jsonrpc.error(msg_id if has_id else None, acp.INVALID_REQUEST,
                                 "invalid request: params must be an object or an array")
        if self.debug:
            session = params.get("sessionId") if isinstance(params, dict) else None
            self.log.debug("<- %s%s%s", method, f" id={msg_id}" if has_id else "",
                           f" session={session}" if session else "")
        if not has_id:
            self._spawn(self._notification(method, params or {}))
            return None
        if (method not in self.handlers and self.backend.alive
                and not (isinstance(params, dict) and "sessionId" in params)):
            return self._relay_now(method, params, msg_id)
        return self._request(method, params, msg_id)

    def _relay_now(self, method: str, params: Any, msg_id: Any) -> asyncio.Future[JsonObject]:
        """A request that needs no session routing goes to the agent at once, without a
        task: this is the path whose round trip the relay benchmark measures."""
        key = json.dumps(msg_id)
        upstream = self.backend.call(method, params)
        self.forwarded[key] = upstream
        answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()

        def relay(done: asyncio.Future[JsonObject]) -> None:
            self.forwarded.pop(key, None)
            answer.set_result({**done.result(), "jsonrpc": "2.0", "id": msg_id})

        upstream.add_done_callback(relay)
        return answer

    async def _request(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        try:
            handler = self.handlers.get(method)
            if handler is not None:
                if not isinstance(params, dict):
                    raise RpcError(acp.INVALID_PARAMS, f"{method} takes an object as params")
                response = await handler(params, msg_id)
            else:
                response = await self._forward(method, params, msg_id)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": msg_id, "error": exc.to_error()}
        except Exception as exc:  # a bug must not take the connection down
            self.log.exception("internal error in %s", method)
            return jsonrpc.error(msg_id, acp.INTERNAL_ERROR, f"internal error: {exc}")
        response = dict(response)
        response["id"] = msg_id
        response.setdefault("jsonrpc", "2.0")
        return response

    def _editor_response(self, message: JsonObject) -> None:
        """The editor answered a request that came from the agent: send it back."""
        msg_id = message.get("id")
        entry = self.reverse.pop(msg_id, None) if isinstance(msg_id, int) else None
        if entry is None:
            self.log.debug("editor answered unknown or settled request %r", msg_id)
            return
        self.reverse_by_agent_id.pop(entry.agent_id, None)
        if entry.session is not None:
            entry.session.permission_requests.discard(msg_id)
        if entry.generation != self.backend.generation:
            return  # the agent that asked has died since
        answer = dict(message)
        answer["id"] = entry.agent_id
        self.backend.send(answer)

    # == helpers =====================================================================

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _record(self, params: JsonObject) -> SessionRecord:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise RpcError(acp.INVALID_PARAMS, "sessionId is required")
        record = self.sessions.get(session_id)
        if record is None:
            if not valid_session_id(session_id):
                raise RpcError(acp.INVALID_PARAMS, f"invalid session id {session_id!r}")
            hint = "; load or resume it first" if self.store.exists(session_id) else ""
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"session not found: {session_id}{hint}",
                           {"sessionId": session_id})
        return record

    def _to_agent(self, record: SessionRecord, params: JsonObject) -> JsonObject:
        return {**params, "sessionId": record.agent_session_id}

    def _register(self, record: SessionRecord) -> None:
        self.sessions[record.id] = record
        if record.agent_session_id:
            self.by_agent_id[record.agent_session_id] = record
        self._update_run_record()

    def _unregister(self, record: SessionRecord) -> None:
        self.sessions.pop(record.id, None)
        if record.agent_session_id and self.by_agent_id.get(record.agent_session_id) is record:
            del self.by_agent_id[record.agent_session_id]
        self.dirty.discard(record.writer)
        record.writer.close()
        self._update_run_record()

    def _update_run_record(self) -> None:
        if self.run_record is not None:
            self.run_record.update(sessions=sorted(self.sessions), agentPid=self.backend.pid)

    def _save_meta(self, record: SessionRecord, touch: bool = True) -> None:
        if touch:
            record.meta.updated = utc_now()
        if not isinstance(record.writer, DiscardedHistory):
            self.store.write_meta(record.meta)

    async def _ensure_agent(self) -> None:
        if self.backend.initialize_params is None:
            raise RpcError(acp.INVALID_REQUEST, "initialize must be called first")
        await self.backend.ensure_running()
        self._update_run_record()

    # == connection-level methods ====================================================

    async def initialize(self, params: JsonObject, msg_id: Any) -> JsonObject:
        self.backend.initialize_params = params
        await self.backend.ensure_running()
        self._update_run_record()
        response = await self.backend.call(acp.INITIALIZE, params)
        result = response.get("result")
        if not isinstance(result, dict):
            return response
        capabilities = result.get("agentCapabilities")
        capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        self.backend.agent_capabilities = dict(capabilities)
        # Served from acpctl's own store, whatever the agent supports.
        capabilities["loadSession"] = True
        session_caps = capabilities.get("sessionCapabilities")
        session_caps = dict(session_caps) if isinstance(session_caps, dict) else {}
        for name in SESSION_CAPABILITIES_SERVED:
            if not isinstance(session_caps.get(name), dict):
                session_caps[name] = {}
        capabilities["sessionCapabilities"] = session_caps
        return {**response, "result": {**result, "agentCapabilities": capabilities}}

    async def authenticate(self, params: JsonObject, msg_id: Any) -> JsonObject:
        await self._ensure_agent()
        response = await self.backend.call(acp.AUTHENTICATE, params)
        if "result" in response:
            self.backend.authenticate_params = params  # replayed after a restart
        return response

    async def _forward(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        """Any other request: relay it, mapping the session id if it names one."""
        await self._ensure_agent()
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            record = self._record(params)
            async with record.lock:
                await self._attach(record)
                future = self.backend.call(method, self._to_agent(record, params))
        else:
            future = self.backend.call(method, params)
        key = json.dumps(msg_id)
        self.forwarded[key] = future
        try:
            return await future
        finally:
            self.forwarded.pop(key, None)

    async def _notification(self, method: str, params: Any) -> None:
        if method == acp.SESSION_CANCEL:
            await self.cancel(params)
        elif method == acp.CANCEL_REQUEST:
            self._cancel_request(params)
        elif not self.backend.alive:
            self.log.debug("dropped %s: the agent is not running", method)
        elif isinstance(params, dict) and params.get("sessionId") in self.sessions:
            record = self.sessions[params["sessionId"]]
            self.backend.notify(method, self._to_agent(record, params))
        else:
            self.backend.notify(method, params)

    def _cancel_request(self, params: Any) -> None:
        """$/cancel_request from the editor names the editor's id: translate it."""
        if not isinstance(params, dict):
            return
        future = self.forwarded.get(json.dumps(params.get("requestId")))
        agent_id = self.backend.request_id_of(future) if future is not None else None
        if agent_id is not None:
            self.backend.notify(acp.CANCEL_REQUEST, {**params, "requestId": agent_id})

    # == sessions ====================================================================

    def _new_record(self, meta: SessionMeta, writer: HistoryWriter,
                    attach_params: JsonObject) -> SessionRecord:
        return SessionRecord(meta=meta, writer=writer, attach_params=attach_params,
                             generation=self.backend.generation)

    async def new_session(self, params: JsonObject, msg_id: Any) -> JsonObject:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(acp.INVALID_PARAMS, "cwd must be an absolute path")
        await self._ensure_agent()
        attach_params = _attach_params(params)

        def register(response: JsonObject) -> None:
            # Runs in the agent's read loop, before the agent's next message is routed,
            # so updates sent right after the response already find their session.
            result = response.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                return
            agent_id = result["sessionId"]
            client_id = agent_id
            if (not valid_session_id(agent_id) or self.store.exists(agent_id)
                    or agent_id in self.sessions):
                client_id = uuid.uuid4().hex
            extra = params.get("additionalDirectories")
            meta = SessionMeta(
                id=client_id, agent=self.agent_name, command=self.argv, cwd=cwd,
                additional_directories=list(extra) if isinstance(extra, list) else [],
                agent_session_id=agent_id,
            )
            writer = self.store.create(meta) if self.history else DiscardedHistory()
            self._register(self._new_record(meta, writer, attach_params))
            if client_id != agent_id:
                response["result"] = {**result, "sessionId": client_id}

        return await self.backend.call(acp.SESSION_NEW, params, on_response=register)

    async def load_session(self, params: JsonObject, msg_id: Any) -> JsonObject:
        return await self._reopen(params, replay=True)

    async def resume_session(self, params: JsonObject, msg_id: Any) -> JsonObject:
        return await self._reopen(params, replay=False)

    async def _reopen(self, params: JsonObject, replay: bool) -> JsonObject:
        session_id = params.get("sessionId")
        if not valid_session_id(session_id):
            raise RpcError(acp.INVALID_PARAMS, f"invalid session id {session_id!r}")
        assert isinstance(session_id, str)
        record = self.sessions.get(session_id)
        if record is None:
            if not self.store.exists(session_id):
                raise RpcError(acp.RESOURCE_NOT_FOUND, f"session not found: {session_id}",
                               {"sessionId": session_id})
            meta = self.store.read_meta(session_id)
            record = SessionRecord(meta=meta, writer=self.store.open_writer(session_id))
            self._register(record)
        record.attach_params = _attach_params({"cwd": record.meta.cwd, **params})
        await self._ensure_agent()
        if replay:
            await self._replay(record)
        async with record.lock:
            result, note = await self._attach(record)
        return jsonrpc.result(None, _with_note(result, note))

    async def _replay(self, record: SessionRecord) -> None:
        for sent, update in enumerate(self.store.iter_updates(record.id), 1):
            self.out.send(jsonrpc.notification(
                acp.SESSION_UPDATE, {"sessionId": record.id, "update": update}))
            if sent % REPLAY_DRAIN_EVERY == 0:
                await self.out.drain()
        await self.out.drain()

    async def _attach(self, record: SessionRecord) -> tuple[Any, str | None]:
        """Make sure the agent knows this session: resume, else load (its replay
        suppressed), else a fresh agent session. Returns the agent's result and a note
        when the agent's context was lost. Call with record.lock held."""
        await self._ensure_agent()
        if record.generation == self.backend.generation:
            return record.attach_result, None
        caps = self.backend.agent_capabilities
        session_caps = caps.get("sessionCapabilities")
        session_caps = session_caps if isinstance(session_caps, dict) else {}
        agent_id = record.agent_session_id
        params = {**record.attach_params}
        result: Any = None
        attached = False
        if agent_id and isinstance(session_caps.get("resume"), dict):
            self.by_agent_id[agent_id] = record
            response = await self.backend.call(acp.SESSION_RESUME,
                                               {**params, "sessionId": agent_id})
            attached = "result" in response
            result = response.get("result")
            if not attached:
                self.log.info("agent could not resume session %s: %s", record.id,
                              response.get("error"))
        if not attached and agent_id and caps.get("loadSession") is True:
            self.by_agent_id[agent_id] = record
            record.suppress_replay = True

            def replay_done(response: JsonObject) -> None:
                record.suppress_replay = False

            response = await self.backend.call(
                acp.SESSION_LOAD, {**params, "sessionId": agent_id}, on_response=replay_done)
            record.suppress_replay = False
            attached = "result" in response
            result = response.get("result")
            if not attached:
                self.log.info("agent could not load session %s: %s", record.id,
                              response.get("error"))
        note = None
        if not attached:
            response = await self.backend.call(acp.SESSION_NEW, params)
            fresh = unwrap(response)
            if not isinstance(fresh, dict) or not isinstance(fresh.get("sessionId"), str):
                raise RpcError(acp.INTERNAL_ERROR, "agent returned no sessionId")
            if agent_id and self.by_agent_id.get(agent_id) is record:
                del self.by_agent_id[agent_id]
            record.meta.agent_session_id = fresh["sessionId"]
            self.by_agent_id[fresh["sessionId"]] = record
            result = {k: v for k, v in fresh.items() if k != "sessionId"}
            if agent_id or record.meta.turns:
                note = CONTEXT_LOST_NOTE
                self.log.warning("session %s: %s; started a fresh agent session",
                                 record.id, note)
            self._save_meta(record)
        record.generation = self.backend.generation
        record.attach_result = result
        return result, note

    async def list_sessions(self, params: JsonObject, msg_id: Any) -> JsonObject:
        cwd = params.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise RpcError(acp.INVALID_PARAMS, "cwd must be a string")
        offset = _decode_cursor(params.get("cursor"))
        metas = self.store.list(cwd=cwd)
        page = metas[offset:offset + LIST_PAGE_SIZE]
        sessions = []
        for meta in page:
            info: JsonObject = {"sessionId": meta.id, "cwd": meta.cwd, "updatedAt": meta.updated}
            if meta.title:
                info["title"] = meta.title
            if meta.additional_directories:
                info["additionalDirectories"] = meta.additional_directories
            info["_meta"] = {"acpctl": {"agent": meta.agent, "turns": meta.turns,
                                        "created": meta.created}}
            sessions.append(info)
        result: JsonObject = {"sessions": sessions}
        if offset + LIST_PAGE_SIZE < len(metas):
            result["nextCursor"] = _encode_cursor(offset + LIST_PAGE_SIZE)
        return jsonrpc.result(None, result)

    async def close_session(self, params: JsonObject, msg_id: Any) -> JsonObject:
        session_id = params.get("sessionId")
        record = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if record is None:
            if isinstance(session_id, str) and self.store.exists(session_id):
                return jsonrpc.result(None, {})
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"session not found: {session_id}",
                           {"sessionId": session_id})
        await self._agent_session_call(record, "close", acp.SESSION_CLOSE)
        self._unregister(record)
        self._save_meta(record, touch=False)
        return jsonrpc.result(None, {})

    async def delete_session(self, params: JsonObject, msg_id: Any) -> JsonObject:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            return jsonrpc.result(None, {})  # unknown sessions: succeed silently (ACP)
        record = self.sessions.get(session_id)
        if record is not None:
            await self._agent_session_call(record, "delete", acp.SESSION_DELETE)
            self._unregister(record)
        self.store.delete(session_id)
        return jsonrpc.result(None, {})

    async def _agent_session_call(self, record: SessionRecord, capability: str,
                                  method: str) -> None:
        session_caps = self.backend.agent_capabilities.get("sessionCapabilities")
        if (record.generation == self.backend.generation and self.backend.alive
                and isinstance(session_caps, dict)
                and isinstance(session_caps.get(capability), dict)):
            response = await self.backend.call(method, {"sessionId": record.agent_session_id})
            if "error" in response:
                self.log.info("agent %s of session %s failed: %s", method, record.id,
                              response["error"])

    # == prompts and cancellation ====================================================

    async def prompt(self, params: JsonObject, msg_id: Any) -> JsonObject:
        record = self._record(params)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcError(acp.INVALID_PARAMS, "prompt must be an array of content blocks")
        if record.prompting:
            raise RpcError(acp.INVALID_REQUEST,
                           f"a prompt is already running in session {record.id}")
        placeholder: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        record.prompt_future = placeholder
        key = json.dumps(msg_id)
        try:
            async with record.lock:
                await self._attach(record)
                for block in prompt:
                    record.writer.update({"sessionUpdate": acp.USER_MESSAGE_CHUNK,
                                          "content": block})
                if record.meta.title is None:
                    record.meta.title = title_from_prompt(prompt)
                record.writer.flush()
                record.prompt_future = self.backend.call(acp.SESSION_PROMPT,
                                                         self._to_agent(record, params))
                self.forwarded[key] = record.prompt_future
            response = await record.prompt_future
            result = response.get("result")
            if isinstance(result, dict) and isinstance(result.get("stopReason"), str):
                record.writer.turn_end(result["stopReason"])
                record.meta.turns += 1
                record.meta.last_stop_reason = result["stopReason"]
            else:
                error = response.get("error") or {}
                record.writer.turn_error(str(error.get("message", "no result")))
            record.writer.sync()
            self._save_meta(record)
            return response
        finally:
            self.forwarded.pop(key, None)
            record.prompt_future = None

    async def cancel(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        record = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
        if record is None:
            return
        async with record.lock:
            if record.generation == self.backend.generation and self.backend.alive:
                self.backend.notify(acp.SESSION_CANCEL, self._to_agent(record, params))
        # Permission requests of this session still open are settled as cancelled, and the
        # editor is told to drop its dialog.
        for editor_id in sorted(record.permission_requests):
            entry = self.reverse.pop(editor_id, None)
            if entry is None:
                continue
            self.reverse_by_agent_id.pop(entry.agent_id, None)
            if entry.generation == self.backend.generation:
                self.backend.send(jsonrpc.result(entry.agent_id,
                                                 {"outcome": {"outcome": acp.CANCELLED}}))
            self.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))
        record.permission_requests.clear()

    # == the agent side (AgentEvents) ================================================

    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None:
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        method = message.get("method")
        if method == acp.CANCEL_REQUEST and isinstance(params, dict):
            editor_id = self.reverse_by_agent_id.get(params.get("requestId"))
            if editor_id is not None:
                self.out.send(jsonrpc.notification(method, {**params, "requestId": editor_id}))
            return
        record = self.by_agent_id.get(agent_session) if isinstance(agent_session, str) else None
        if record is None:
            self.out.write(raw + b"\n")
            return
        if record.suppress_replay:
            return
        if method == acp.SESSION_UPDATE:
            assert isinstance(params, dict)
            update = params.get("update")
            if isinstance(update, dict):
                record.writer.agent_message(raw)
                self.dirty.add(record.writer)
                if update.get("sessionUpdate") == acp.SESSION_INFO_UPDATE and "title" in update:
                    record.meta.title = update["title"]
        if self.debug:
            self.log.debug("-> %s session=%s", method, record.id)
        if record.id == agent_session:
            self.out.write(raw + b"\n")
        else:
            assert isinstance(params, dict)
            self.out.send({**message, "params": {**params, "sessionId": record.id}})

    def on_agent_request(self, message: JsonObject, generation: int) -> None:
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        record = None
        if isinstance(agent_session, str):
            record = self.by_agent_id.get(agent_session)
            if record is None:
                self.backend.send(jsonrpc.error(message["id"], acp.RESOURCE_NOT_FOUND,
                                                f"unknown session {agent_session}"))
                return
        editor_id = next(self._reverse_ids)
        method = str(message.get("method"))
        self.reverse[editor_id] = _ReverseRequest(message["id"], generation, record, method)
        self.reverse_by_agent_id[message["id"]] = editor_id
        forwarded = {**message, "id": editor_id}
        if record is not None:
            assert isinstance(params, dict)
            forwarded["params"] = {**params, "sessionId": record.id}
            if method == acp.REQUEST_PERMISSION:
                record.permission_requests.add(editor_id)
        if self.debug:
            self.log.debug("-> %s id=%s%s", method, editor_id,
                           f" session={record.id}" if record else "")
        self.out.send(forwarded)

    async def on_agent_batch_end(self) -> None:
        for writer in self.dirty:
            writer.flush()
        self.dirty.clear()
        await self.out.drain()

    def on_agent_exit(self, description: str, generation: int) -> None:
        # Requests the dead agent asked the editor are void; tell the editor.
        for editor_id, entry in list(self.reverse.items()):
            if entry.generation == generation:
                del self.reverse[editor_id]
                self.reverse_by_agent_id.pop(entry.agent_id, None)
                if entry.session is not None:
                    entry.session.permission_requests.discard(editor_id)
                self.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))
        self.log.warning("%s; it will be restarted on the next request", description)
        self._update_run_record()

    # == shutdown ====================================================================

    async def shutdown(self) -> None:
        """Settle prompts as cancelled, end the agent's process tree, flush history."""
        if self._closed:
            return
        self._closed = True
        self.backend.settle_pending(acp.SESSION_PROMPT,
                                    jsonrpc.result(None, {"stopReason": acp.CANCELLED}))
        for _ in range(3):  # let prompt tasks record their end and answer
            await asyncio.sleep(0)
        await self.out.drain()
        await self.backend.stop()
        for record in list(self.sessions.values()):
            self._unregister(record)
            self._save_meta(record, touch=False)
        for task in list(self.tasks):
            task.cancel()
        await self.out.drain()


def _is_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


def _attach_params(params: JsonObject) -> JsonObject:
    attach: JsonObject = {"cwd": params.get("cwd"), "mcpServers": params.get("mcpServers") or []}
    if isinstance(params.get("additionalDirectories"), list):
        attach["additionalDirectories"] = params["additionalDirectories"]
    return attach


def _with_note(result: Any, note: str | None) -> Any:
    result = dict(result) if isinstance(result, dict) else {}
    if note:
        meta = dict(result.get("_meta") or {})
        meta["acpctl"] = {"contextRestored": False, "note": note}
        result["_meta"] = meta
    return result


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["o"]
        if isinstance(offset, int) and offset >= 0:
            return offset
    except (ValueError, KeyError, TypeError):
        pass
    raise RpcError(acp.INVALID_PARAMS, f"invalid cursor {cursor!r}")


async def run_server(agent_name: str, argv: list[str], env: dict[str, str],
                     log: logging.Logger, record: RunRecord, store: SessionStore,
                     history: bool = True, agent_process: AgentProcess | None = None,
                     kind: str = "acp") -> None:
    """Serve the editor on stdin/stdout until EOF, SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    output = await jsonrpc.Output.open(1)
    reader = await jsonrpc.open_input(0)
    server = AcpServer(agent_name, argv, env, store, log, output, record, history,
                       agent_process, kind)
    # Start the agent now, while the editor is still sending initialize: its start-up
    # overlaps ours. A failure here is reported in the answer to initialize.
    early_start = asyncio.create_task(server.backend.ensure_running())
    early_start.add_done_callback(lambda task: task.cancelled() or task.exception())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(server.serve(reader))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    log.info("editor closed the connection" if serving.done() else "stopping on signal")
    await server.shutdown()
    serving.cancel()
    stopping.cancel()
    output.close()
