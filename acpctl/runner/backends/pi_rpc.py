"""The pi-rpc backend: agents that speak pi's `--mode rpc` JSONL protocol, as ACP agents.

To the server this backend looks like one more ACP agent (the same call/notify/send surface
as the native relay); behind it, every ACP session owns one `pi --mode rpc` child whose cwd
is the session's cwd and whose session files live in the session's own directory of the
store (`<sessions>/<id>/pi/`). A child that dies fails its prompt with its stderr tail and is
started again, on the same session file, by the next prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import shutil
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from acpctl import jsonrpc, paths
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.backends import pi_translate as pt
from acpctl.runner.backends.acp import AgentEvents, ResponseHook
from acpctl.runner.supervisor import AgentProcess, RestartPolicy

HANDSHAKE_TIMEOUT_S = 30.0
NO_GATE_VARIABLE = "ACPCTL_NO_PERMISSION_GATE"
_EXITED = object()  # put on a listener's queue when the child dies
_TOOL_MARK = re.compile(r"\[acpctl:([^\]]+)\]")


def gate_extension() -> str:
    """The pi extension that asks before write, edit and bash (shipped in the package)."""
    return str(resources.files("acpctl.runner.backends").joinpath("pi_permission_gate.ts"))


class PiChild:
    """One `pi --mode rpc` process: commands matched to responses by id, events to the
    current listener."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str,
                 log: logging.Logger) -> None:
        self.process = AgentProcess(argv, env, cwd=cwd)
        self.log = log
        self.pending: dict[str, asyncio.Future[JsonObject]] = {}
        self.listener: asyncio.Queue[Any] | None = None
        self.ids = itertools.count(1)
        self.exit_code: int | None = None
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> JsonObject:
        """Spawn pi and wait for its answer to get_state; returns that state."""
        self.process.spawn()
        await self.process.attach(self.log)
        self.reader = asyncio.create_task(self._read())
        try:
            state = await asyncio.wait_for(self.command("get_state"), HANDSHAKE_TIMEOUT_S)
        except asyncio.TimeoutError as exc:
            await self.stop()
            raise RpcError(acp.INTERNAL_ERROR,
                           f"pi did not answer get_state within {HANDSHAKE_TIMEOUT_S:g}s",
                           {"stderr": self.stderr_tail()}) from exc
        except RpcError as exc:
            await self.stop()
            raise RpcError(exc.code, f"pi failed to start: {exc.message}",
                           {"stderr": self.stderr_tail()}) from exc
        return state if isinstance(state, dict) else {}

    def stderr_tail(self) -> list[str]:
        return list(self.process.stderr_tail)[-10:]

    @property
    def alive(self) -> bool:
        return self.exit_code is None and self.process.returncode is None

    def send(self, message: JsonObject) -> None:
        self.process.write(jsonrpc.encode(message))

    async def command(self, kind: str, **fields: Any) -> Any:
        """Send a command; its data, or RpcError with pi's error."""
        if not self.alive:
            raise RpcError(acp.INTERNAL_ERROR, "pi is not running",
                           {"stderr": self.stderr_tail()})
        msg_id = f"acpctl-{next(self.ids)}"
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = future
        self.send({"id": msg_id, "type": kind, **fields})
        response = await future
        if not response.get("success"):
            raise RpcError(acp.INTERNAL_ERROR, str(response.get("error") or f"{kind} failed"))
        return response.get("data")

    def subscribe(self) -> asyncio.Queue[Any]:
        self.listener = asyncio.Queue()
        if not self.alive:
            self.listener.put_nowait(_EXITED)
        return self.listener

    async def _read(self) -> None:
        async for batch in jsonrpc.read_batches(self.process.stdout):
            for line in batch:
                if isinstance(line, jsonrpc.OversizedLine):
                    continue
                try:
                    message = json.loads(line)
                except ValueError:  # pi may print a prelude before its JSON
                    self.log.info("pi stdout (not JSON): %.200s", line.decode("utf-8", "replace"))
                    continue
                if not isinstance(message, dict):
                    continue
                if message.get("type") == "response" and message.get("id") in self.pending:
                    future = self.pending.pop(message["id"])
                    if not future.done():
                        future.set_result(message)
                elif self.listener is not None:
                    self.listener.put_nowait(message)
        self.exit_code = await self.process.wait()
        tail = self.stderr_tail()
        self.log.warning("pi exited with status %s%s", self.exit_code,
                         "; last stderr lines:\n  " + "\n  ".join(tail) if tail else "")
        for future in self.pending.values():
            if not future.done():
                future.set_result({"success": False,
                                   "error": f"pi exited with status {self.exit_code}"})
        self.pending.clear()
        if self.listener is not None:
            self.listener.put_nowait(_EXITED)

    async def stop(self) -> None:
        await self.process.terminate()
        if self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.reader, 2)


class PiSession:
    """One ACP session: its child, its prompt, its cancellation generation."""

    def __init__(self, backend: PiRpcBackend, session_id: str, cwd: str) -> None:
        self.backend = backend
        self.id = session_id
        self.cwd = cwd
        self.directory = backend.sessions_root / session_id / "pi"
        self.child: PiChild | None = None
        self.restarts = RestartPolicy()
        self.prompting = False
        self.cancel_generation = 0
        self.announced: dict[str, tuple[str, JsonObject]] = {}  # tool id -> (name, args)
        self.before: dict[str, JsonObject] = {}  # tool id -> diff of the file before it ran
        self.accepts_images = False

    async def start(self, resume: bool) -> None:
        argv = [*self.backend.argv, "--session-dir", str(self.directory)]
        if resume:
            argv.append("--continue")
        if not os.environ.get(NO_GATE_VARIABLE) and not self.backend.env.get(NO_GATE_VARIABLE):
            argv += ["--extension", gate_extension()]
        child = PiChild(argv, self.backend.env, self.cwd, self.backend.log)
        try:
            state = await child.start()
        except OSError as exc:
            raise RpcError(acp.INTERNAL_ERROR,
                           f"cannot start pi ({argv[0]}): {exc.strerror or exc}") from exc
        model = state.get("model")
        self.accepts_images = isinstance(model, dict) and "image" in (model.get("input") or [])
        self.child = child

    async def ensure_child(self) -> PiChild:
        if self.child is not None and self.child.alive:
            return self.child
        delay = self.restarts.next_delay()
        if delay is None:
            raise RpcError(acp.INTERNAL_ERROR, "pi crashed 5 times in the last minute; "
                           "acpctl stopped restarting it (see `acpctl logs`)")
        await asyncio.sleep(delay)
        self.backend.log.info("session %s: starting pi again on its session file", self.id)
        await self.start(resume=True)
        assert self.child is not None
        return self.child

    def emit(self, update: JsonObject) -> None:
        self.backend.emit(self.id, update)

    async def prompt(self, blocks: list[Any]) -> JsonObject:
        if self.prompting:
            raise RpcError(acp.INVALID_REQUEST, "a prompt is already running")
        self.prompting = True
        try:
            return await self._prompt(blocks)
        finally:
            self.prompting = False

    async def _prompt(self, blocks: list[Any]) -> JsonObject:
        child = await self.ensure_child()
        text, images, dropped = pt.prompt_input(blocks, self.accepts_images)
        for note in dropped:
            self.backend.log.info("session %s: dropped %s from the prompt", self.id, note)
        generation = self.cancel_generation
        events = child.subscribe()  # before sending: no event can be missed
        fields: JsonObject = {"message": text}
        if images:
            fields["images"] = images
        await child.command("prompt", **fields)
        stream = pt.StreamText()
        last_assistant: Any = None
        while True:
            event = await events.get()
            if event is _EXITED:
                raise RpcError(acp.INTERNAL_ERROR,
                               f"pi exited with status {child.exit_code} during the prompt",
                               {"exitStatus": child.exit_code, "stderr": child.stderr_tail()})
            kind = event.get("type")
            if kind == "message_start" and _role(event) == "assistant":
                stream = pt.StreamText()
            elif kind == "message_update":
                self._message_update(event, stream)
            elif kind == "message_end" and _role(event) == "assistant":
                last_assistant = event.get("message")
                self._message_end(last_assistant, stream)
            elif kind == "tool_execution_start":
                self._tool_start(event)
            elif kind == "tool_execution_update":
                self.emit(pt.tool_progress(str(event.get("toolCallId")),
                                           event.get("partialResult")))
            elif kind == "tool_execution_end":
                tool_id = str(event.get("toolCallId"))
                self.emit(pt.tool_end(tool_id, str(event.get("toolName")), event,
                                      self.before.pop(tool_id, None)))
            elif kind == "extension_ui_request":
                self._dialog(child, event)
            elif kind in ("auto_retry_start", "compaction_start"):
                note = event.get("errorMessage") or event.get("reason") or ""
                self.emit(pt.chunk(acp.AGENT_THOUGHT_CHUNK, f"({kind.replace('_', ' ')}: "
                                   f"{note})\n"))
            elif kind == "plan_mode_complete":
                planned = pt.plan(event)
                if planned:
                    self.emit(planned)
            elif kind == "agent_end" and await self._settled(child):
                break
        if self.cancel_generation != generation:
            return {"stopReason": acp.CANCELLED}
        reason, error = pt.stop_reason(last_assistant)
        if reason is None:
            raise RpcError(acp.INTERNAL_ERROR, f"pi: {error}")
        return {"stopReason": reason}

    async def _settled(self, child: PiChild) -> bool:
        """Retries and compaction can end a run and start another: the turn is over when
        pi says it is neither streaming nor compacting."""
        try:
            state = await child.command("get_state")
        except RpcError:
            return True
        return not (isinstance(state, dict)
                    and (state.get("isStreaming") or state.get("isCompacting")))

    def _message_update(self, event: JsonObject, stream: pt.StreamText) -> None:
        delta = event.get("assistantMessageEvent") or {}
        kind = delta.get("type")
        index = int(delta.get("contentIndex") or 0)
        partial = delta.get("partial") or event.get("message")
        if kind == "text_delta":
            missing = stream.delta(index, str(delta.get("delta", "")),
                                   pt.block_text(partial, index, "text"))
            if missing:
                self.emit(pt.chunk(acp.AGENT_MESSAGE_CHUNK, missing))
        elif kind == "thinking_delta":
            missing = stream.delta(index, str(delta.get("delta", "")),
                                   pt.block_text(partial, index, "thinking"))
            if missing:
                self.emit(pt.chunk(acp.AGENT_THOUGHT_CHUNK, missing))
        elif kind == "toolcall_end":
            call = delta.get("toolCall") or {}
            self._announce(str(call.get("id")), str(call.get("name")),
                           call.get("arguments") or {}, "pending")

    def _message_end(self, message: Any, stream: pt.StreamText) -> None:
        """Send what the final message holds and the events never did."""
        for index, block in enumerate(message.get("content") or []
                                      if isinstance(message, dict) else []):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                missing = stream.missing(index, str(block.get("text", "")))
                if missing:
                    self.emit(pt.chunk(acp.AGENT_MESSAGE_CHUNK, missing))
            elif block.get("type") == "thinking":
                missing = stream.missing(index, str(block.get("thinking", "")))
                if missing:
                    self.emit(pt.chunk(acp.AGENT_THOUGHT_CHUNK, missing))
            elif block.get("type") == "toolCall" and str(block.get("id")) not in self.announced:
                self._announce(str(block.get("id")), str(block.get("name")),
                               block.get("arguments") or {}, "pending")

    def _announce(self, tool_id: str, name: str, args: JsonObject, status: str) -> None:
        self.announced[tool_id] = (name, args)
        self.emit(pt.tool_call(tool_id, name, args, status, self.cwd))

    def _tool_start(self, event: JsonObject) -> None:
        tool_id = str(event.get("toolCallId"))
        name = str(event.get("toolName"))
        args = event.get("args") or {}
        before = pt.planned_diff(name, args, self.cwd)
        if before is not None:
            self.before[tool_id] = before
        if tool_id in self.announced:
            self.emit(pt.tool_call(tool_id, name, args, "in_progress", self.cwd, update=True))
        else:
            self._announce(tool_id, name, args, "in_progress")

    def _dialog(self, child: PiChild, request: JsonObject) -> None:
        method = request.get("method")
        if method in ("confirm", "select"):
            self.backend.ask_permission(self, child, request)
        elif method in ("input", "editor"):
            child.send({"type": "extension_ui_response", "id": request.get("id"),
                        "cancelled": True})
            self.emit(pt.chunk(acp.AGENT_MESSAGE_CHUNK,
                               f"\n(acpctl: pi asked for {method} input "
                               f"\"{request.get('title', '')}\", which ACP cannot show; "
                               "cancelled)\n"))
        elif method == "notify":
            self.emit(pt.chunk(acp.AGENT_MESSAGE_CHUNK, f"\n{request.get('message', '')}\n"))
        elif method == "setTitle" and request.get("title"):
            self.emit({"sessionUpdate": acp.SESSION_INFO_UPDATE,
                       "title": str(request["title"])})

    def permission_tool(self, request: JsonObject) -> JsonObject:
        mark = _TOOL_MARK.search(str(request.get("message", "")))
        tool_id = mark.group(1) if mark else next(reversed(self.announced), "pi-dialog")
        name, args = self.announced.get(tool_id, ("other", {}))
        tool: JsonObject = {"toolCallId": tool_id, "title": pt.tool_title(name, args)
                            if name != "other" else str(request.get("title", "")),
                            "kind": pt.TOOL_KINDS.get(name, "other"), "status": "pending"}
        diff = pt.planned_diff(name, args, self.cwd)
        if diff is not None:
            tool["content"] = [diff]
        return tool

    def cancel(self) -> None:
        self.cancel_generation += 1
        if self.child is not None and self.child.alive:
            self.child.send({"type": "abort"})

    async def close(self) -> None:
        if self.child is not None:
            await self.child.stop()
            self.child = None


def _role(event: JsonObject) -> Any:
    message = event.get("message")
    return message.get("role") if isinstance(message, dict) else None


class PiRpcBackend:
    """A virtual ACP agent in front of per-session pi children (see the module doc)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: logging.Logger,
                 events: AgentEvents, sessions_root: Path) -> None:
        self.argv = argv
        self.env = env
        self.log = log
        self.events = events
        self.sessions_root = sessions_root
        self.generation = 0
        self.alive = False
        self.initialize_params: JsonObject | None = None
        self.authenticate_params: JsonObject | None = None
        self.agent_capabilities: JsonObject = {
            "loadSession": False,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "sessionCapabilities": {"resume": {}, "close": {}},
        }
        self.sessions: dict[str, PiSession] = {}
        self.dialogs: dict[int, tuple[PiChild, JsonObject]] = {}
        self._dialog_ids = itertools.count(1)
        self._calls: dict[asyncio.Future[JsonObject], str] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    pid = None

    async def ensure_running(self) -> None:
        if shutil.which(self.argv[0]) is None and not os.access(self.argv[0], os.X_OK):
            raise RpcError(acp.INTERNAL_ERROR, f"cannot start pi: {self.argv[0]} not found")
        self.alive = True
        self.generation = max(self.generation, 1)

    def call(self, method: str, params: Any, on_response: ResponseHook | None = None,
             ) -> asyncio.Future[JsonObject]:
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._calls[future] = method

        async def run() -> None:
            try:
                response = jsonrpc.result(None, await self._handle(method, params or {}))
            except RpcError as exc:
                response = {"jsonrpc": "2.0", "id": None, "error": exc.to_error()}
            except Exception as exc:  # a bug must fail the request, not the connection
                self.log.exception("pi backend: %s failed", method)
                response = jsonrpc.error(None, acp.INTERNAL_ERROR, f"internal error: {exc}")
            if on_response is not None:
                on_response(response)
            if not future.done():
                future.set_result(response)
            self._calls.pop(future, None)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> int | None:
        return None  # $/cancel_request has nothing to cancel on pi's side

    def notify(self, method: str, params: Any) -> None:
        if method == acp.SESSION_CANCEL and isinstance(params, dict):
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None:
                session.cancel()

    def send(self, message: JsonObject) -> None:
        """The editor answered a permission request: answer pi's dialog."""
        entry = self.dialogs.pop(message.get("id"), None)  # type: ignore[arg-type]
        if entry is None:
            return
        child, request = entry
        outcome = (message.get("result") or {}).get("outcome") if "result" in message else None
        child.send(pt.dialog_answer(request, outcome))

    def settle_pending(self, method: str, response: JsonObject) -> None:
        for future, called in list(self._calls.items()):
            if called == method and not future.done():
                future.set_result(response)

    async def stop(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()),
                             return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()

    # -- the agent side, for PiSession ----------------------------------------------

    def emit(self, session_id: str, update: JsonObject) -> None:
        message = jsonrpc.notification(acp.SESSION_UPDATE,
                                       {"sessionId": session_id, "update": update})
        self.events.on_agent_notification(message, jsonrpc.encode(message)[:-1])

    def ask_permission(self, session: PiSession, child: PiChild, request: JsonObject) -> None:
        dialog_id = next(self._dialog_ids)
        self.dialogs[dialog_id] = (child, request)
        self.events.on_agent_request(jsonrpc.request(dialog_id, acp.REQUEST_PERMISSION, {
            "sessionId": session.id, "toolCall": session.permission_tool(request),
            "options": pt.permission_options(request)}), self.generation)

    # -- ACP methods ----------------------------------------------------------------

    async def _handle(self, method: str, params: JsonObject) -> Any:
        if method == acp.INITIALIZE:
            return {"protocolVersion": acp.PROTOCOL_VERSION,
                    "agentCapabilities": self.agent_capabilities, "authMethods": [],
                    "agentInfo": {"name": "pi", "title": "pi (through acpctl)"}}
        if method == acp.SESSION_NEW:
            return await self._new_session(params)
        if method == acp.SESSION_RESUME:
            return await self._resume(params)
        session = self.sessions.get(str(params.get("sessionId")))
        if method == acp.SESSION_PROMPT:
            if session is None:
                raise RpcError(acp.RESOURCE_NOT_FOUND, f"unknown session {params.get('sessionId')}")
            return await session.prompt(params.get("prompt") or [])
        if method in (acp.SESSION_CLOSE, acp.SESSION_DELETE):
            if session is not None:
                await session.close()
                del self.sessions[session.id]
            return {}
        raise RpcError(acp.METHOD_NOT_FOUND, f"method not found: {method}")

    @staticmethod
    def _cwd(params: JsonObject) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise RpcError(acp.INVALID_PARAMS,
                           f"cwd must be the absolute path of an existing directory: {cwd!r}")
        return cwd

    async def _new_session(self, params: JsonObject) -> JsonObject:
        cwd = self._cwd(params)
        session = PiSession(self, uuid.uuid4().hex, cwd)
        paths.ensure_private_dir(session.directory)
        try:
            await session.start(resume=False)
        except BaseException:
            # No half-started session is kept: neither the child nor its directory.
            shutil.rmtree(session.directory.parent, ignore_errors=True)
            raise
        self.sessions[session.id] = session
        return {"sessionId": session.id}

    async def _resume(self, params: JsonObject) -> JsonObject:
        session_id = str(params.get("sessionId"))
        if session_id in self.sessions:
            return {}
        session = PiSession(self, session_id, self._cwd(params))
        if not session.directory.is_dir():
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"no pi session file for {session_id}",
                           {"sessionId": session_id})
        await session.start(resume=True)
        self.sessions[session_id] = session
        return {}
