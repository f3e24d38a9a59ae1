"""The coordinator of `acpctl run --acp`: routes every message between the editor's end
(`endpoint`) and the injected backend, by the session that owns it.

The path of one prompt, top to bottom:
  editor line → EditorEndpoint.serve → route_request → prompt() → Turns.prompt: the
  session's turn, the recorder writes the user's blocks, the backend sends session/prompt
  under its own id → the agent's updates arrive in FromAgent.on_agent_notification
  (from_agent.py): recorded as their
  bytes, relayed to the editor as the same bytes → the agent's response resolves the
  backend's future → the recorder writes the turn's end to the OS (the fsync follows in a
  group commit) → the endpoint replies under the editor's id.
Everything else the server does not handle itself is relayed untouched, with the session
id mapped when it names one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, ResponseHook, RpcError
from acpctl.runner import listing
from acpctl.runner.attach import Attacher
from acpctl.runner.clients import Client, tell
from acpctl.runner.context import Connection
from acpctl.runner.endpoint import Answer, EditorEndpoint, host_answer
from acpctl.runner.from_agent import FromAgent
from acpctl.runner.handshaking import Handshaking
from acpctl.runner.lifecycle import SessionLifecycle
from acpctl.runner.questions import Questions
from acpctl.runner.replies import ReadLoopReply
from acpctl.runner.session import SessionRecord
from acpctl.runner.turns import Turns
from acpctl.store.lines import CorruptSession

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
# What a client whose credentials make it an observer may send: it sees, never acts.
OBSERVER_METHODS = frozenset(
    {
        acp.INITIALIZE,
        acp.SESSION_LIST,
        acp.SESSION_LOAD,
        acp.SESSION_RESUME,
        acp.SESSION_ATTACH,
        acp.SESSION_DETACH,
        acp.SESSION_CLOSE,  # for an observer, only its own detach
        acp.CANCEL_REQUEST,  # of its own requests
    }
)

Handler = Callable[[Client, JsonObject, Any], Awaitable[JsonObject]]
# A method whose answer is the agent's own, answered from the read loop when it may be.
AgentAnswered = Callable[[Client, JsonObject, Any, ReadLoopReply | None], Awaitable[JsonObject]]


def _params_only(handler: Callable[[JsonObject], Awaitable[JsonObject]]) -> Handler:
    return lambda _client, params, _msg_id: handler(params)


def _no_id(handler: Callable[[Client, JsonObject], Awaitable[JsonObject]]) -> Handler:
    return lambda client, params, _msg_id: handler(client, params)


class ClientRoutes:
    """One client's end of the server: what it sends is routed as coming from it."""

    def __init__(self, server: AcpServer, client: Client) -> None:
        self.server = server
        self.client = client

    def route_request(
        self, method: str, params: Any, msg_id: Any, in_order: bool = False
    ) -> Answer:
        return self.server.route_request(self.client, method, params, msg_id, in_order)

    def route_notification(self, method: str, params: Any) -> None:
        self.server.route_notification(self.client, method, params)

    def route_response(self, message: JsonObject) -> None:
        self.server.route_response(self.client, message)


class AcpServer:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.tasks: set[asyncio.Future[Any]] = set()  # every client's requests in flight
        self.attacher = Attacher(conn)
        self.questions = Questions(conn)
        self.turns = Turns(conn, self.attacher, self.questions)
        self.lifecycle = SessionLifecycle(conn, self.attacher, self.turns.end, self.questions)
        self.from_agent = FromAgent(conn, self.lifecycle)
        self.lifecycle.route_held = self.from_agent.on_agent_notification
        self._closed = False
        self.handshaking = Handshaking(conn)
        lifecycle = self.lifecycle
        self.handlers: dict[str, Handler] = {
            acp.INITIALIZE: _no_id(self.handshaking.initialize),
            acp.AUTHENTICATE: _params_only(self.handshaking.authenticate),
            acp.LOGOUT: _params_only(self.handshaking.logout),
            acp.SESSION_NEW: _no_id(lifecycle.new),
            acp.SESSION_LOAD: _no_id(lifecycle.load),
            acp.SESSION_RESUME: _no_id(lifecycle.resume),
            acp.SESSION_ATTACH: _no_id(lifecycle.attach),
            acp.SESSION_DETACH: _no_id(lifecycle.detach),
            acp.SESSION_FORK: _no_id(lifecycle.fork),
            acp.SESSION_LIST: _params_only(functools.partial(listing.list_sessions, conn)),
            acp.SESSION_CLOSE: _no_id(lifecycle.close),
            acp.SESSION_DELETE: _params_only(lifecycle.delete),
        }
        self.agent_answered: dict[str, AgentAnswered] = {
            acp.SESSION_PROMPT: self.prompt,
            **{method: functools.partial(self.setting, method) for method in SETTINGS_METHODS},
        }
        conn.backend.connect(self.from_agent, conn.handshake)

    async def serve(self, client: Client) -> None:
        """Serve `client` until it closes its end; then it leaves the sessions it saw
        (which stay open: the session host keeps them for the next client)."""
        endpoint = self.join(client)
        try:
            await endpoint.serve()
        finally:
            self.leave(client)

    def join(self, client: Client) -> EditorEndpoint:
        """`client` is connected: the endpoint that reads what it sends."""
        endpoint = EditorEndpoint(client.channel, self.conn.log, self.conn.debug, self.tasks)
        endpoint.router = ClientRoutes(self, client)
        self.conn.clients.append(client)
        return endpoint

    def leave(self, client: Client) -> None:
        self.conn.clients.remove(client)
        self.lifecycle.left(client)

    def spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # == from a client (Router, through ClientRoutes) ==================================

    def route_request(
        self, client: Client, method: str, params: Any, msg_id: Any, in_order: bool = False
    ) -> Answer:
        """`in_order`: a batch's member, which takes the same path as the members that need
        a task (they reach the agent in the batch's order then)."""
        rule = acp.METHODS.get(method)
        if rule is not None and rule.handling is acp.Handling.NOT_RELAYED:
            return jsonrpc.error(msg_id, acp.METHOD_NOT_FOUND, f"{method}: {rule.why}")
        answered_by_host = self.conn.host_methods.get(method)  # read-only: observers too
        if not client.may_control and method not in OBSERVER_METHODS and not answered_by_host:
            return jsonrpc.error(
                msg_id, acp.NOT_AUTHORISED, f"not authorised: an observer cannot send {method}"
            )
        if client.handshake_failed and method != acp.INITIALIZE:
            return jsonrpc.error(
                msg_id, acp.INVALID_REQUEST, f"initialize failed on this connection: no {method}"
            )
        if answered_by_host is not None:
            return host_answer(msg_id, lambda: answered_by_host(client, params))
        reply = None if in_order else ReadLoopReply(client, msg_id, method, self.conn.incidents)
        if (
            reply is not None
            and method not in self.handlers
            and method not in self.agent_answered
            and self.conn.backend.alive
            and not (isinstance(params, dict) and "sessionId" in params)
        ):
            return self._relay_now(client, method, params, msg_id, reply)
        return self._request(client, method, params, msg_id, reply)

    def route_notification(self, client: Client, method: str, params: Any) -> None:
        if method == acp.CANCEL_REQUEST:
            self._cancel_request(client, params)
        elif not client.may_control:
            self.conn.log.info("dropped %s from an observer", method)
        elif method == acp.SESSION_CANCEL:
            self.spawn(self.cancel(client, params))
        elif not self.conn.backend.alive:
            self.conn.log.debug("dropped %s: the agent is not running", method)
        else:
            record = (
                self.conn.sessions.get(params.get("sessionId"))
                if isinstance(params, dict)
                else None
            )
            self.conn.backend.notify(method, record.to_agent(params) if record else params)

    def route_response(self, client: Client, message: JsonObject) -> None:
        self.questions.answered(client, message)

    def _relay_now(
        self, client: Client, method: str, params: Any, msg_id: Any, reply: ReadLoopReply
    ) -> asyncio.Future[JsonObject | None]:
        """A request that needs no session routing goes to the agent at once, without a
        task: this is the path whose round trip the relay benchmark measures. Answered
        from the read loop (replies.py); the future says when."""
        upstream = self.conn.backend.call(method, params, on_response=reply.hook())
        self.conn.ids.forwarded(
            client.key(msg_id), msg_id, upstream, self.conn.backend.request_id_of(upstream)
        )
        answered: asyncio.Future[JsonObject | None] = asyncio.get_running_loop().create_future()

        def done(upstream: asyncio.Future[JsonObject]) -> None:
            if answered.done():
                return
            if reply.sent or upstream.cancelled():
                answered.set_result(None)
            else:  # a backend that settled it without its hook: answered here
                answered.set_result({**upstream.result(), "jsonrpc": "2.0", "id": msg_id})

        upstream.add_done_callback(done)
        return answered

    async def _request(
        self, client: Client, method: str, params: Any, msg_id: Any, reply: ReadLoopReply | None
    ) -> JsonObject | None:
        """The answer to send; None when the read loop has sent it (`reply`)."""
        try:
            handler = self.handlers.get(method)
            answered = self.agent_answered.get(method)
            if handler is None and answered is None:
                response = await self._forward(client, method, params, msg_id, reply)
            elif not isinstance(params, dict):
                raise RpcError(acp.INVALID_PARAMS, f"{method} takes an object as params")
            elif answered is not None:
                response = await answered(client, params, msg_id, reply)
            else:
                assert handler is not None
                response = await handler(client, params, msg_id)
        except RpcError as exc:
            return jsonrpc.error_response(msg_id, exc)
        except Exception as exc:  # a bug must not take the connection down
            self.conn.log.exception("internal error in %s", method)
            return jsonrpc.error(msg_id, acp.INTERNAL_ERROR, f"internal error: {exc}")
        if reply is not None and reply.sent:
            return None
        if reply is not None:  # answered here: the agent's late answer is not sent again
            reply.sent = True
        if "error" in response:  # the agent's answer (acpctl's own errors are raised)
            self.conn.incidents.failed(method, response["error"])
        return {**response, "jsonrpc": "2.0", "id": msg_id}

    async def _forward(
        self,
        client: Client,
        method: str,
        params: Any,
        msg_id: Any,
        reply: ReadLoopReply | None,
        before: ResponseHook | None = None,
    ) -> JsonObject:
        """Any other request: relay it, mapping the session id if it names one; answered
        from the read loop when `reply` is given, after `before`."""
        await self.conn.ensure_agent()
        hook = reply.hook(before) if reply is not None else before
        call = functools.partial(self.conn.backend.call, on_response=hook)
        if not (isinstance(params, dict) and isinstance(params.get("sessionId"), str)):
            future = call(method, params)
        elif method in DETACHED_METHODS or (
            acp.is_extension(method) and not self.conn.sessions.get(params["sessionId"])
        ):
            # An extension method naming a session acpctl does not have open is relayed as
            # it is (the id mapped when acpctl knows it): docs/relay.md.
            future = call(method, {**params, "sessionId": self._agent_id_of(params)})
        else:
            record = self._require(params, client)
            async with record.lock:
                await self.attacher.attach(record)
                future = call(method, record.to_agent(params))
        self.conn.ids.forwarded(
            client.key(msg_id), msg_id, future, self.conn.backend.request_id_of(future)
        )
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

    async def setting(
        self,
        method: str,
        client: Client,
        params: JsonObject,
        msg_id: Any,
        reply: ReadLoopReply | None,
    ) -> JsonObject:
        """set_mode, set_model, set_config_option, set_title: relayed; what the agent
        accepted is kept in the session's state (re-applied after a context-less
        reattach) and its metadata, in the read loop: before an update the agent sends
        after its answer changes the state again."""

        def kept(response: JsonObject) -> None:
            if "result" not in response:
                return
            session_id = params.get("sessionId")
            record = self.conn.sessions.get(session_id)
            title = params.get("title") if method == acp.SESSION_SET_TITLE else None
            if record is None:
                # set_title need not have the session open: the history takes it too.
                if not (isinstance(session_id, str) and isinstance(title, str)):
                    return
                if self.conn.store.exists(session_id):
                    with contextlib.suppress(OSError, CorruptSession):
                        self.conn.store.retitle(session_id, title)
                return
            if isinstance(title, str):
                record.meta.title = title
            else:
                record.state.on_set(method, params, response["result"])
            self.conn.recorder.save(record)

        return await self._forward(client, method, params, msg_id, reply, kept)

    def _cancel_request(self, client: Client, params: Any) -> None:
        """$/cancel_request from a client names its own id: translate it (or end a prompt
        that is still waiting its turn, which the agent never saw; a running prompt becomes
        its session's session/cancel, runner/turns.py)."""
        if not isinstance(params, dict):
            return
        try:
            key = client.key(params.get("requestId"))
        except TypeError:  # an unhashable id
            return
        if self.turns.withdraw(key):
            return
        upstream = self.conn.ids.upstream(client, params.get("requestId"))
        if upstream is not None and self.turns.cancel_running(upstream):
            return
        agent_id = self.conn.backend.request_id_of(upstream) if upstream is not None else None
        if agent_id is not None:
            self.conn.backend.notify(acp.CANCEL_REQUEST, {**params, "requestId": agent_id})

    # == sessions ======================================================================

    def _require(self, params: JsonObject, client: Client) -> SessionRecord:
        record = self.conn.sessions.require(params, self.conn.store.exists, client)
        if record.clients[client] != acp.CONTROLLER:
            raise RpcError(
                acp.NOT_AUTHORISED, f"not authorised: an observer of session {record.id}"
            )
        return record

    # == prompts and cancellation (runner/turns.py) ===================================

    async def prompt(
        self, client: Client, params: JsonObject, msg_id: Any, reply: ReadLoopReply | None
    ) -> JsonObject:
        record = self._require(params, client)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcError(acp.INVALID_PARAMS, "prompt must be an array of content blocks")
        # The session's other clients see what this one asked, as the user's message, with
        # the id it is recorded under.
        message_id = str(uuid.uuid4())
        others = [other for other in record.clients if other is not client]
        for block in prompt if others else ():
            update = {
                "sessionUpdate": acp.USER_MESSAGE_CHUNK,
                "content": block,
                "messageId": message_id,
            }
            tell(
                others,
                jsonrpc.notification(
                    acp.SESSION_UPDATE, {"sessionId": record.id, "update": update}
                ),
            )
        return await self.turns.prompt(
            record, params, prompt, client.key(msg_id), msg_id, reply, message_id
        )

    async def cancel(self, client: Client, params: Any) -> None:
        record = (
            self.conn.sessions.get(params.get("sessionId")) if isinstance(params, dict) else None
        )
        if record is not None and record.clients.get(client) == acp.CONTROLLER:
            await self.turns.cancel(record, params)

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
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=SHUTDOWN_GRACE_S)
        await self.conn.drain()
        await self.conn.backend.stop()
        await self.conn.recorder.committed()
        for record in self.conn.sessions:
            self.lifecycle.forget(record)
        for task in list(self.tasks):
            task.cancel()
        await self.conn.drain()
