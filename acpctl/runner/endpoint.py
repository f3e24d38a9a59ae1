"""A client's end of the server (the editor's, for `run --acp`): reads JSON-RPC from the
client's channel, checks that each message is one, answers batches as arrays, and writes
every reply. What a message means is the router's business (`runner.server.AcpServer`)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.channel import Channel

# Batch members, and messages of one read, routed between two turns of the event loop.
BATCH_SLICE = 64
# A client's requests awaiting their answers (a prompt, which lasts a turn, aside): past
# this, its input waits. A client that floods requests then holds a few places in the
# agent's queue and the event loop, not all of them, and the others' answers stay quick.
MAX_IN_FLIGHT = 32

# What routing a request gives: the answer now, or later; later and None: the router has
# answered it itself (runner/replies.py).
Answer = JsonObject | Awaitable[JsonObject | None]


class Router(Protocol):
    def route_request(
        self, method: str, params: Any, msg_id: Any, in_order: bool = False
    ) -> Answer: ...
    def route_notification(self, method: str, params: Any) -> None: ...
    def route_response(self, message: JsonObject) -> None: ...


class EditorEndpoint:
    def __init__(
        self,
        channel: Channel,
        log: logging.Logger,
        debug: bool,
        tasks: set[asyncio.Future[Any]] | None = None,
    ) -> None:
        self.out = channel
        self.log = log
        self.debug = debug
        self.router: Router | None = None
        # The requests in flight (shared by a server's clients, which waits for them all).
        self.tasks: set[asyncio.Future[Any]] = set() if tasks is None else tasks
        self._waiting = 0  # this client's requests in flight, prompts aside
        self._room = asyncio.Event()  # set when _waiting falls below MAX_IN_FLIGHT

    async def serve(self) -> None:
        """Until the editor closes its end."""
        async for batch in self.out.incoming():
            for index, item in enumerate(batch, 1):
                if isinstance(item, jsonrpc.BadLine):
                    self.out.send(jsonrpc.error_response(item.msg_id, item.error))
                else:
                    self.dispatch(item[0])
                if self._waiting >= MAX_IN_FLIGHT:
                    self._room.clear()
                    await self._room.wait()
                elif index % BATCH_SLICE == 0:
                    await asyncio.sleep(0)  # the other clients' input, between ours
            await self.out.drain()

    def dispatch(self, message: Any) -> None:
        if isinstance(message, list):
            self.spawn(self._batch(message))
            return
        answer = self._route(message)
        if isinstance(answer, dict):
            self.reply(answer)
            return
        if answer is None:
            return
        counted = message.get("method") != acp.SESSION_PROMPT
        if counted:
            self._waiting += 1
        if isinstance(answer, asyncio.Future):
            # The relay's fast path: no task for a plain forwarded request.
            answer.add_done_callback(lambda done: self._answered(done, counted))
        else:
            self.spawn(self._answered_later(answer, counted))

    def _answered(self, done: asyncio.Future[JsonObject | None], counted: bool) -> None:
        self._free(counted)
        if not done.cancelled() and (response := done.result()) is not None:
            self.reply(response)  # (cancelled: the connection is closing)

    async def _answered_later(self, answer: Awaitable[JsonObject | None], counted: bool) -> None:
        try:
            response = await answer  # in this task: nothing the answer sent overtakes it
        finally:
            self._free(counted)
        if response is not None:
            self.reply(response)

    def _free(self, counted: bool) -> None:
        """A request answered (or given up): its place in flight is free."""
        if counted:
            self._waiting -= 1
            if self._waiting < MAX_IN_FLIGHT:
                self._room.set()

    def spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def reply(self, response: JsonObject) -> None:
        if self.debug:
            error = response.get("error")
            self.log.debug(
                "-> response id=%s%s",
                response.get("id"),
                f" error={error.get('code')}" if isinstance(error, dict) else "",
            )
        self.out.send(response)

    async def _batch(self, messages: list[Any]) -> None:
        """JSON-RPC batches: answered as one array; an empty batch is invalid. The members
        run as tasks of their own, so a large batch does not hold up other input."""
        if not messages:
            self.out.send(jsonrpc.error(None, acp.INVALID_REQUEST, "invalid request: empty batch"))
            return
        pending: list[JsonObject | asyncio.Future[JsonObject | None]] = []
        for index, message in enumerate(messages, 1):
            if _is_notification(message):
                # The batch's requests before it run as tasks: it goes out after their first
                # steps, which send them, so the agent gets the batch's order.
                asyncio.get_running_loop().call_soon(self._route, message)
            else:
                answer = self._route(message, in_order=True)
                if isinstance(answer, dict):
                    pending.append(answer)
                elif answer is not None:
                    pending.append(asyncio.ensure_future(answer))
            if index % BATCH_SLICE == 0:
                await asyncio.sleep(0)  # let the rest of the connection's input through
        answers = [a if isinstance(a, dict) else await a for a in pending]
        answers = [a for a in answers if a is not None]  # (a batch's are never sent early)
        if answers:
            self.out.send(answers)

    def _route(self, message: Any, in_order: bool = False) -> Answer | None:
        """Check one message and hand it to the router: a reply, a pending one, or None.
        Never raises: a bug answers with an internal error instead of ending the
        connection."""
        try:
            return self._checked(message, in_order)
        except Exception as exc:
            self.log.exception("internal error dispatching a message")
            if isinstance(message, dict) and jsonrpc.is_id(message.get("id", [])):
                return jsonrpc.error(message["id"], acp.INTERNAL_ERROR, f"internal error: {exc}")
            return None

    def _checked(self, message: Any, in_order: bool = False) -> Answer | None:
        assert self.router is not None
        problem = _invalid(message)
        if problem is not None:
            return problem
        method = message.get("method")
        if method is None:
            self.router.route_response(message)
            return None
        params = message.get("params")
        if self.debug:
            session = params.get("sessionId") if isinstance(params, dict) else None
            self.log.debug(
                "<- %s%s%s",
                method,
                f" id={message['id']}" if "id" in message else "",
                f" session={session}" if session else "",
            )
        if "id" not in message:
            self.router.route_notification(method, params)  # as sent: no params, none added
            return None
        return self.router.route_request(method, params, message["id"], in_order)


def _is_notification(message: Any) -> bool:
    """A valid JSON-RPC notification (an invalid one is answered, so it is no notification)."""
    return _invalid(message) is None and "method" in message and "id" not in message


def _invalid(message: Any) -> JsonObject | None:
    """The error a message that is not a valid JSON-RPC 2.0 request, notification or
    response gets; None when it is valid."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        msg_id = message.get("id") if isinstance(message, dict) else None
        return jsonrpc.error(
            msg_id if jsonrpc.is_id(msg_id) else None,
            acp.INVALID_REQUEST,
            "invalid request: expected a JSON-RPC 2.0 object",
        )
    has_id = "id" in message
    msg_id = message.get("id")
    if has_id and not jsonrpc.is_id(msg_id):
        return jsonrpc.error(None, acp.INVALID_REQUEST, "invalid request: bad id")
    method = message.get("method")
    if method is None:
        if not has_id or ("result" not in message and "error" not in message):
            return jsonrpc.error(
                msg_id, acp.INVALID_REQUEST, "invalid request: no method, and not a response"
            )
        return None
    if not isinstance(method, str):
        return jsonrpc.error(
            msg_id, acp.INVALID_REQUEST, "invalid request: method must be a string"
        )
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return jsonrpc.error(
            msg_id, acp.INVALID_REQUEST, "invalid request: params must be an object or an array"
        )
    return None


def host_answer(msg_id: Any, answer: Callable[[], Any]) -> Answer:
    """A host method's answer: at once, or (awaitable) once it is done."""

    def failed(exc: RpcError) -> JsonObject:
        return {"jsonrpc": "2.0", "id": msg_id, "error": exc.to_error()}

    try:
        answered = answer()
    except RpcError as exc:
        return failed(exc)
    if not inspect.isawaitable(answered):
        return jsonrpc.result(msg_id, answered)

    async def later() -> JsonObject:
        try:
            return jsonrpc.result(msg_id, await answered)
        except RpcError as exc:
            return failed(exc)

    return later()
