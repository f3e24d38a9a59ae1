"""The coordinator of `acpctl run --acp`: routes every message between the editor's end
(`endpoint`) and the injected backend, by the session that owns it.

The path of one prompt, top to bottom:
  editor line → EditorEndpoint.serve → route_request → prompt() → Turns.prompt: the
  session's turn, the recorder writes the user's blocks, the backend sends session/prompt
  under its own id → the agent's updates arrive in on_agent_notification: recorded as their
  bytes, relayed to the editor as the same bytes → the agent's response resolves the
  backend's future → the recorder writes the turn's end to the OS (the fsync follows in a
  group commit) → the endpoint replies under the editor's id.
Everything else the server does not handle itself is relayed untouched, with the session
id mapped when it names one.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.attach import Attacher
from acpctl.runner.context import Connection
from acpctl.runner.endpoint import Answer, EditorEndpoint
from acpctl.runner.idmap import ReverseRequest, map_at
from acpctl.runner.lifecycle import SessionLifecycle
from acpctl.runner.session import SessionRecord
from acpctl.runner.turns import Turns
from acpctl.store.sessions import CorruptSession

# How long in-flight requests may take to answer once the editor has gone or a signal came.
SHUTDOWN_GRACE_S = 2.0
# Methods that name a session that need not be open on the connection (the schema says so):
# relayed with the agent's id for it, without attaching it.
DETACHED_METHODS = frozenset(
    {acp.SESSION_STATUS, acp.SESSION_SET_TITLE, acp.SESSION_ARCHIVE, acp.SESSION_UNARCHIVE}
)
# Relayed, and what they set is kept in the session's state (or title).
SETTINGS_METHODS = frozenset(
    {
        acp.SESSION_SET_MODE,
        acp.SESSION_SET_MODEL,
        acp.SESSION_SET_CONFIG_OPTION,
        acp.SESSION_SET_TITLE,
    }
)
STATE_UPDATES = frozenset({acp.CURRENT_MODE_UPDATE, acp.CONFIG_OPTION_UPDATE})
# The update kinds the server looks into (everything else is relayed and recorded blind).
SPECIAL_UPDATES = STATE_UPDATES | {
    acp.SESSION_INFO_UPDATE,
    acp.SUBAGENT_UPDATE,
    acp.SESSION_MESSAGE,
    acp.SESSION_MESSAGE_CHUNK,
}
NESTED_SESSION_IDS = acp.METHODS[acp.SESSION_UPDATE].session_ids[1:]

Handler = Callable[[JsonObject, Any], Awaitable[JsonObject]]


def _params_only(handler: Callable[[JsonObject], Awaitable[JsonObject]]) -> Handler:
    return lambda params, _msg_id: handler(params)


class AcpServer:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.endpoint = EditorEndpoint(conn.out, conn.log, conn.debug)
        self.endpoint.router = self
        self.attacher = Attacher(conn)
        self.turns = Turns(conn, self.attacher)
        self.lifecycle = SessionLifecycle(conn, self.attacher, self.turns.end)
        self._closed = False
        lifecycle = self.lifecycle
        self.handlers: dict[str, Handler] = {
            acp.INITIALIZE: _params_only(self.initialize),
            acp.AUTHENTICATE: _params_only(self.authenticate),
            acp.LOGOUT: _params_only(self.logout),
            acp.SESSION_NEW: _params_only(lifecycle.new),
            acp.SESSION_LOAD: _params_only(lifecycle.load),
            acp.SESSION_RESUME: _params_only(lifecycle.resume),
            acp.SESSION_FORK: _params_only(lifecycle.fork),
            acp.SESSION_LIST: _params_only(lifecycle.list_sessions),
            acp.SESSION_CLOSE: _params_only(lifecycle.close),
            acp.SESSION_DELETE: _params_only(lifecycle.delete),
            acp.SESSION_PROMPT: self.prompt,
            **{method: functools.partial(self.setting, method) for method in SETTINGS_METHODS},
        }
        conn.backend.connect(self, conn.handshake)

    # == from the editor (Router) ======================================================

    def route_request(self, method: str, params: Any, msg_id: Any) -> Answer:
        rule = acp.METHODS.get(method)
        if rule is not None and rule.handling is acp.Handling.NOT_RELAYED:
            return jsonrpc.error(msg_id, acp.METHOD_NOT_FOUND, f"{method}: {rule.why}")
        if (
            method not in self.handlers
            and self.conn.backend.alive
            and not (isinstance(params, dict) and "sessionId" in params)
        ):
            return self._relay_now(method, params, msg_id)
        return self._request(method, params, msg_id)

    def route_notification(self, method: str, params: Any) -> None:
        if method == acp.SESSION_CANCEL:
            self.endpoint.spawn(self.cancel(params))
        elif method == acp.CANCEL_REQUEST:
            self._cancel_request(params)
        elif not self.conn.backend.alive:
            self.conn.log.debug("dropped %s: the agent is not running", method)
        else:
            record = (
                self.conn.sessions.get(params.get("sessionId"))
                if isinstance(params, dict)
                else None
            )
            self.conn.backend.notify(method, record.to_agent(params) if record else params)

    def route_response(self, message: JsonObject) -> None:
        """The editor answered a request that came from the agent: send it back."""
        request = self.conn.ids.settle(message.get("id"), message)
        if request is None:
            self.conn.log.debug("editor answered unknown or settled request %r", message.get("id"))
            return
        if request.method == acp.REQUEST_PERMISSION and request.session is not None:
            self.conn.recorder.permission_outcome(request.session, message)
        if request.generation == self.conn.backend.generation:  # else the agent that asked died
            self.conn.backend.send({**message, "id": request.agent_id})

    def _relay_now(self, method: str, params: Any, msg_id: Any) -> asyncio.Future[JsonObject]:
        """A request that needs no session routing goes to the agent at once, without a
        task: this is the path whose round trip the relay benchmark measures."""
        upstream = self.conn.backend.call(method, params)
        self.conn.ids.forwarded(msg_id, upstream, self.conn.backend.request_id_of(upstream))
        answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()

        def relay(done: asyncio.Future[JsonObject]) -> None:
            response = done.result()
            if "error" in response:
                self.conn.incidents.failed(method, response["error"])
            answer.set_result({**response, "jsonrpc": "2.0", "id": msg_id})

        upstream.add_done_callback(relay)
        return answer

    async def _request(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        try:
            handler = self.handlers.get(method)
            if handler is None:
                response = await self._forward(method, params, msg_id)
            elif not isinstance(params, dict):
                raise RpcError(acp.INVALID_PARAMS, f"{method} takes an object as params")
            else:
                response = await handler(params, msg_id)
        except RpcError as exc:
            return jsonrpc.error_response(msg_id, exc)
        except Exception as exc:  # a bug must not take the connection down
            self.conn.log.exception("internal error in %s", method)
            return jsonrpc.error(msg_id, acp.INTERNAL_ERROR, f"internal error: {exc}")
        if "error" in response:  # the agent's answer (acpctl's own errors are raised)
            self.conn.incidents.failed(method, response["error"])
        return {**response, "jsonrpc": "2.0", "id": msg_id}

    async def _forward(self, method: str, params: Any, msg_id: Any) -> JsonObject:
        """Any other request: relay it, mapping the session id if it names one."""
        await self.conn.ensure_agent()
        if not (isinstance(params, dict) and isinstance(params.get("sessionId"), str)):
            future = self.conn.backend.call(method, params)
        elif method in DETACHED_METHODS:
            future = self.conn.backend.call(
                method, {**params, "sessionId": self._agent_id_of(params)}
            )
        else:
            record = self._require(params)
            async with record.lock:
                await self.attacher.attach(record)
                future = self.conn.backend.call(method, record.to_agent(params))
        self.conn.ids.forwarded(msg_id, future, self.conn.backend.request_id_of(future))
        return await future

    def _agent_id_of(self, params: JsonObject) -> Any:
        """The agent's id for a session named by a method that does not need it open:
        from the connection, else from the history, else the id as given (a session only
        the agent knows)."""
        session_id = params["sessionId"]
        record = self.conn.sessions.get(session_id)
        if record is not None:
            return record.agent_session_id
        if self.conn.store.exists(session_id):
            try:
                return self.conn.store.read_meta(session_id).agent_session_id or session_id
            except (OSError, CorruptSession):
                pass
        return session_id

    async def setting(self, method: str, params: JsonObject, msg_id: Any) -> JsonObject:
        """set_mode, set_model, set_config_option, set_title: relayed; what the agent
        accepted is kept in the session's state (re-applied after a context-less
        reattach) and its metadata."""
        response = await self._forward(method, params, msg_id)
        record = self.conn.sessions.get(params.get("sessionId"))
        if record is not None and "result" in response:
            if method == acp.SESSION_SET_TITLE and isinstance(params.get("title"), str):
                record.meta.title = params["title"]
            else:
                record.state.on_set(method, params, response["result"])
            self.conn.recorder.save(record)
        return response

    def _cancel_request(self, params: Any) -> None:
        """$/cancel_request from the editor names the editor's id: translate it (or end a
        prompt that is still waiting its turn, which the agent never saw; a running prompt
        becomes its session's session/cancel, runner/turns.py)."""
        if not isinstance(params, dict) or self.turns.withdraw(params.get("requestId")):
            return
        upstream = self.conn.ids.upstream(params.get("requestId"))
        if upstream is not None and self.turns.cancel_running(upstream):
            return
        agent_id = self.conn.backend.request_id_of(upstream) if upstream is not None else None
        if agent_id is not None:
            self.conn.backend.notify(acp.CANCEL_REQUEST, {**params, "requestId": agent_id})

    # == connection-level methods ======================================================

    async def initialize(self, params: JsonObject) -> JsonObject:
        # Both sides speak the version acpctl's own handlers implement, at most.
        handshake = self.conn.handshake
        to_agent = handshake.to_agent(params)
        await self.conn.start_agent()
        return handshake.to_editor(await self.conn.backend.call(acp.INITIALIZE, to_agent))

    async def authenticate(self, params: JsonObject) -> JsonObject:
        return await self._login_state(acp.AUTHENTICATE, params, replayed=params)

    async def logout(self, params: JsonObject) -> JsonObject:
        # A restart must not log in again.
        return await self._login_state(acp.LOGOUT, params, replayed=None)

    async def _login_state(
        self, method: str, params: JsonObject, replayed: JsonObject | None
    ) -> JsonObject:
        """Relay authenticate or logout; on success, what a restarted agent is sent."""
        await self.conn.ensure_agent()
        response = await self.conn.backend.call(method, params)
        if "result" in response:
            self.conn.handshake.logged_in(replayed)
        return response

    # == sessions ======================================================================

    def _require(self, params: JsonObject) -> SessionRecord:
        return self.conn.sessions.require(params, self.conn.store.exists)

    # == prompts and cancellation (runner/turns.py) ===================================

    async def prompt(self, params: JsonObject, msg_id: Any) -> JsonObject:
        record = self._require(params)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcError(acp.INVALID_PARAMS, "prompt must be an array of content blocks")
        return await self.turns.prompt(record, params, prompt, msg_id)

    async def cancel(self, params: Any) -> None:
        record = (
            self.conn.sessions.get(params.get("sessionId")) if isinstance(params, dict) else None
        )
        if record is not None:
            await self.turns.cancel(record, params)

    # == from the agent (AgentEvents) ==================================================

    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None:
        """The hot path: every streamed update comes here. It is recorded and relayed as
        the agent's own bytes; only the kinds in SPECIAL_UPDATES are looked into."""
        params = message.get("params")
        if not isinstance(params, dict) or "sessionId" not in params:
            self._sessionless_notification(message, params, raw)
            return
        agent_session = params["sessionId"]
        record = self.conn.sessions.of_agent(agent_session)
        if record is None:
            # A session closed (or never opened) on this connection: what the agent still
            # says about it has no one to go to, and must not reach the editor under the
            # agent's raw id.
            self.conn.log.debug(
                "dropped %s for session %r, not open here", message.get("method"), agent_session
            )
            return
        if record.suppress_replay:
            return
        record.heard = time.monotonic()
        update = params.get("update")
        if message.get("method") == acp.SESSION_UPDATE and isinstance(update, dict):
            self.conn.recorder.agent_update(record, raw)
            kind = update.get("sessionUpdate")
            if kind in SPECIAL_UPDATES:
                params = self._special_update(record, params, update, kind)
        if self.conn.debug:
            self.conn.log.debug("-> %s session=%s", message.get("method"), record.id)
        if record.id == agent_session and params is message["params"]:
            line = raw + b"\n"
        else:
            line = jsonrpc.encode({**message, "params": {**params, "sessionId": record.id}})
        if record.unannounced is None:
            self.conn.out.write(line)
        else:
            record.unannounced.append(line)

    def _sessionless_notification(self, message: JsonObject, params: Any, raw: bytes) -> None:
        if message.get("method") == acp.CANCEL_REQUEST and isinstance(params, dict):
            editor_id = self.conn.ids.editor_id(params.get("requestId"))
            if editor_id is not None:
                self.conn.out.send(
                    jsonrpc.notification(acp.CANCEL_REQUEST, {**params, "requestId": editor_id})
                )
            return
        self.conn.out.write(raw + b"\n")

    def _special_update(
        self, record: SessionRecord, params: JsonObject, update: JsonObject, kind: str
    ) -> JsonObject:
        """Kept: the title, the mode and options. Mapped: nested session ids. Returns the
        params to relay (the same object when nothing changed)."""
        if kind == acp.SESSION_INFO_UPDATE:
            if isinstance(update.get("title"), str):
                record.meta.title = update["title"]
        elif kind in STATE_UPDATES:
            record.state.on_update(update)
        else:
            return self._map_sessions(params, NESTED_SESSION_IDS)
        return params

    def _map_sessions(self, params: JsonObject, paths: tuple[str, ...]) -> JsonObject:
        """`params` with the agent's session ids at `paths` replaced by the editor's, where
        acpctl knows the session (a subagent's session it never saw keeps its id)."""

        def to_editor(agent_id: Any) -> Any:
            record = self.conn.sessions.of_agent(agent_id)
            return record.id if record is not None else agent_id

        for path in paths:
            params = map_at(params, path, to_editor)
        return params

    def on_agent_request(self, message: JsonObject, generation: int) -> None:
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        record = None
        if isinstance(agent_session, str):
            record = self.conn.sessions.of_agent(agent_session)
            if record is None:
                self.conn.backend.send(
                    jsonrpc.error(
                        message["id"], acp.RESOURCE_NOT_FOUND, f"unknown session {agent_session}"
                    )
                )
                return
        method = str(message.get("method"))
        if record is not None:
            record.heard = time.monotonic()  # a question is not silence
            if method == acp.REQUEST_PERMISSION and isinstance(params, dict):
                self.conn.recorder.permission(record, params)
        editor_id = self.conn.ids.to_editor(
            ReverseRequest(message["id"], generation, record, method)
        )
        forwarded = {**message, "id": editor_id}
        if isinstance(params, dict):
            rule = acp.METHODS.get(method)
            for path in rule.request_ids if rule else ():
                params = map_at(params, path, self.conn.ids.editor_request)
            if record is not None:
                params = {**params, "sessionId": record.id}
            forwarded["params"] = params
        if self.conn.debug:
            self.conn.log.debug(
                "-> %s id=%s%s", method, editor_id, f" session={record.id}" if record else ""
            )
        self.conn.out.send(forwarded)

    async def on_agent_batch_end(self) -> None:
        self.conn.recorder.batch_end()
        await self.conn.out.drain()

    def on_agent_exit(self, description: str, generation: int) -> None:
        # Requests the dead agent asked the editor are void; tell the editor.
        void = jsonrpc.error(None, acp.INTERNAL_ERROR, description)
        for editor_id in self.conn.ids.waiting(lambda request: request.generation == generation):
            self.conn.ids.settle(editor_id, void)
            self.conn.out.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id}))
        self.conn.log.warning("%s; it will be restarted on the next request", description)
        self.conn.update_run_record()

    # == shutdown ======================================================================

    async def shutdown(self) -> None:
        """Settle prompts as cancelled, end the agent's process tree, flush history."""
        if self._closed:
            return
        self._closed = True
        self.conn.backend.settle_pending(
            acp.SESSION_PROMPT, jsonrpc.result(None, {"stopReason": acp.CANCELLED})
        )
        # Requests still in flight (the prompts just settled among them) get a moment to
        # record their end and answer; whatever still waits for the agent then is cut off.
        if self.endpoint.tasks:
            await asyncio.wait(set(self.endpoint.tasks), timeout=SHUTDOWN_GRACE_S)
        await self.conn.out.drain()
        await self.conn.backend.stop()
        await self.conn.recorder.committed()
        for record in self.conn.sessions:
            self.lifecycle.forget(record)
        for task in list(self.endpoint.tasks):
            task.cancel()
        await self.conn.out.drain()
