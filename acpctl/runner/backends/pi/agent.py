"""The ACP face of the pi backend: one virtual ACP agent in front of a pi child per session
(see the package docstring). Requests become coroutines on the sessions; pi's dialogs become
session/request_permission requests to the editor."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, ResponseHook, RpcError
from acpctl.runner.backends import AgentEvents
from acpctl.runner.backends.pi import translate as pt
from acpctl.runner.backends.pi.child import PiChild, rpc_argv
from acpctl.runner.backends.pi.session import PiSession
from acpctl.runner.handshake import Handshake
from acpctl.sandbox import Policy
from acpctl.store.sessions import SessionStore, valid_session_id

# What the pi bridge itself implements (acpctl adds what it serves from its store).
AGENT_CAPABILITIES: JsonObject = {
    "loadSession": False,
    "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
    "sessionCapabilities": {"resume": {}, "close": {}, "fork": {}},
}
BACKEND_DIR = "pi"  # inside each session's directory of the store: pi's session files


class PiRpcBackend:
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log: logging.Logger,
        store: SessionStore,
        sandbox: Policy | None = None,
    ) -> None:
        self.argv = rpc_argv(argv)
        self.sandbox = sandbox  # each session's pi runs in it, its session file writable
        self.env = env
        self.log = log
        self.store = store
        self.events: AgentEvents | None = None
        self.generation = 0
        self.alive = False
        self.sessions: dict[str, PiSession] = {}
        self.dialogs: dict[int, tuple[PiChild, JsonObject]] = {}
        self._dialog_ids = itertools.count(1)
        # Each call in flight: its method, and its hook (run however it is answered).
        self._calls: dict[asyncio.Future[JsonObject], tuple[str, ResponseHook | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.warm: PiSession | None = None  # pi started ahead for the next session/new
        self._handlers = {
            acp.INITIALIZE: self._initialize,
            acp.SESSION_NEW: self._new_session,
            acp.SESSION_RESUME: self._resume,
            acp.SESSION_PROMPT: self._prompt,
            acp.SESSION_CLOSE: self._close,
            acp.SESSION_DELETE: self._close,
            acp.SESSION_SET_CONFIG_OPTION: self._set_config_option,
            acp.SESSION_FORK: self._fork,
        }

    @property
    def pid(self) -> int | None:
        """No process for the connection (each session has its own) but a pi started ahead,
        so that `acpctl ps` shows what a spare holds."""
        child = self.warm.child if self.warm is not None else None
        return child.process.pid if child is not None and child.alive else None

    def connect(self, events: AgentEvents, handshake: Handshake) -> None:
        # pi's processes are per session and need no ACP handshake of their own.
        self.events = events

    async def ensure_running(self) -> None:
        if shutil.which(self.argv[0]) is None and not os.access(self.argv[0], os.X_OK):
            raise RpcError(acp.INTERNAL_ERROR, f"cannot start pi: {self.argv[0]} not found")
        self.alive = True
        self.generation = max(self.generation, 1)

    def call(
        self,
        method: str,
        params: Any,
        on_response: ResponseHook | None = None,
    ) -> asyncio.Future[JsonObject]:
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._calls[future] = (method, on_response)

        async def run() -> None:
            response = await self._answer(method, params or {})
            if self._calls.pop(future, None) is None or future.done():
                return  # settled already (settle_pending), its hook run then
            if on_response is not None:
                on_response(response)
            future.set_result(response)

        self.spawn(run())
        return future

    async def _answer(self, method: str, params: JsonObject) -> JsonObject:
        handler = self._handlers.get(method)
        try:
            if handler is None:
                raise RpcError(acp.METHOD_NOT_FOUND, f"method not found: {method}")
            return jsonrpc.result(None, await handler(params))
        except RpcError as exc:
            return jsonrpc.error_response(None, exc)
        except Exception as exc:  # a bug must fail the request, not the connection
            self.log.exception("pi backend: %s failed", method)
            return jsonrpc.error(None, acp.INTERNAL_ERROR, f"internal error: {exc}")

    def request_id_of(self, future: asyncio.Future[JsonObject]) -> None:
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
        for future, (called, on_response) in list(self._calls.items()):
            if called == method and not future.done():
                del self._calls[future]
                if on_response is not None:
                    on_response(response)
                future.set_result(response)

    async def stop(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()), return_exceptions=True)
        await self._drop_warm()
        for task in list(self._tasks):
            task.cancel()

    # -- pi started ahead (the session host's spare) ------------------------------------

    async def warm_up(self, cwd: str) -> None:
        """pi started in `cwd` before any session/new asks for it (the session host's spare
        for the editor's first thread): pi's own start, 1 to 3 s of node and extensions,
        is paid ahead. Taken only by a session/new in that very `cwd`, where pi is told
        `new_session` first: settings, models, extensions and context files are read again
        then, so nothing read ahead is used."""
        try:
            session = await self._started(cwd, uuid.uuid4().hex, None)
        except (RpcError, OSError) as exc:  # nothing is left of it (_started's cleanup)
            self.log.info("pi did not start ahead: %s", getattr(exc, "message", exc))
            return
        self.warm = session
        self.log.info("pi started ahead in %s (pid %s)", cwd, self.pid)

    async def _warm_for(self, cwd: str) -> PiSession | None:
        """The pi started ahead, made a new session, when it was started in `cwd`; else
        None, and it is stopped."""
        session, self.warm = self.warm, None
        if session is None:
            return None
        child = session.child
        if session.cwd == cwd and child is not None and child.alive:
            try:
                await session.renew()
                return session
            except RpcError as exc:
                self.log.info("pi started ahead could not begin a session: %s", exc.message)
        await self._drop(session)
        return None

    async def _drop_warm(self) -> None:
        session, self.warm = self.warm, None
        if session is not None:
            await self._drop(session)

    async def _drop(self, session: PiSession) -> None:
        await session.close()
        self.store.discard_backend_dir(session.id, BACKEND_DIR)

    # -- towards the server, for the sessions -------------------------------------------

    def emit(self, session_id: str, update: JsonObject) -> None:
        assert self.events is not None
        message = jsonrpc.notification(
            acp.SESSION_UPDATE, {"sessionId": session_id, "update": update}
        )
        self.events.on_agent_notification(message, jsonrpc.encode(message)[:-1])

    def ask_permission(self, session: PiSession, child: PiChild, request: JsonObject) -> None:
        assert self.events is not None
        dialog_id = next(self._dialog_ids)
        self.dialogs[dialog_id] = (child, request)
        self.events.on_agent_request(
            jsonrpc.request(
                dialog_id,
                acp.REQUEST_PERMISSION,
                {
                    "sessionId": session.id,
                    "toolCall": session.permission_tool(request),
                    "options": pt.permission_options(request),
                },
            ),
            self.generation,
        )

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- ACP methods --------------------------------------------------------------------

    async def _initialize(self, params: JsonObject) -> JsonObject:
        return {
            "protocolVersion": acp.PROTOCOL_VERSION,
            "agentCapabilities": AGENT_CAPABILITIES,
            "authMethods": [],
            "agentInfo": {"name": "pi", "title": "pi (through acpctl)"},
        }

    @staticmethod
    def _cwd(params: JsonObject) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise RpcError(
                acp.INVALID_PARAMS,
                f"cwd must be the absolute path of an existing directory: {cwd!r}",
            )
        return cwd

    async def _new_session(self, params: JsonObject) -> JsonObject:
        return await self._open(self._cwd(params), _store_id(params), copy_from=None)

    async def _fork(self, params: JsonObject) -> JsonObject:
        """pi's session file copied into a new session, which pi continues: the fork has
        the parent's context."""
        parent = self._session(params)
        return await self._open(self._cwd(params), None, copy_from=parent.directory)

    async def _open(self, cwd: str, session_id: str | None, copy_from: Path | None) -> JsonObject:
        session = await self._warm_for(cwd) if session_id is None and copy_from is None else None
        if session is None:
            session = await self._started(cwd, session_id or uuid.uuid4().hex, copy_from)
        self.sessions[session.id] = session
        described, commands = await asyncio.gather(session.describe(), session.commands())
        # After the answer, once the editor knows the session.
        asyncio.get_running_loop().call_soon(session.introduce, commands)
        return {"sessionId": session.id, **described}

    async def _started(self, cwd: str, session_id: str, copy_from: Path | None) -> PiSession:
        directory = self.store.backend_dir(session_id, BACKEND_DIR, create=True)
        session = PiSession(self, session_id, cwd, directory)
        try:
            if copy_from is not None:
                for path in copy_from.glob("*.jsonl"):
                    shutil.copyfile(path, directory / path.name)
            await session.start(resume=copy_from is not None)
        except BaseException:
            # No half-started session is kept: neither the child nor its directory.
            self.store.discard_backend_dir(session_id, BACKEND_DIR)
            raise
        return session

    async def _resume(self, params: JsonObject) -> JsonObject:
        session_id = str(params.get("sessionId"))
        if session_id in self.sessions:
            return await self.sessions[session_id].describe()
        cwd = self._cwd(params)
        try:
            directory = self.store.backend_dir(session_id, BACKEND_DIR, create=False)
        except (ValueError, FileNotFoundError):
            raise RpcError(
                acp.RESOURCE_NOT_FOUND,
                f"no pi session file for {session_id}",
                {"sessionId": session_id},
            ) from None
        session = PiSession(self, session_id, cwd, directory)
        self.sessions[session_id] = session
        # pi writes its file at the first message: a session never prompted has none, and
        # nothing to lose.
        session.resume_in_background(continued=any(directory.glob("*.jsonl")))
        self.spawn(self._once_started(session))
        return {}

    async def _once_started(self, session: PiSession) -> None:
        """After a resume: pi's options and commands, once pi is up."""
        try:
            described = await session.describe()
        except RpcError as exc:  # the next request says it again, to the editor
            self.log.warning("session %s: pi did not start: %s", session.id, exc.message)
            return
        session.emit({"sessionUpdate": acp.CONFIG_OPTION_UPDATE, **described})
        session.introduce(await session.commands())

    def _session(self, params: JsonObject) -> PiSession:
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"unknown session {params.get('sessionId')}")
        return session

    async def _prompt(self, params: JsonObject) -> JsonObject:
        return await self._session(params).prompt(params.get("prompt") or [])

    async def _set_config_option(self, params: JsonObject) -> JsonObject:
        return await self._session(params).set_config(params.get("configId"), params.get("value"))

    async def _close(self, params: JsonObject) -> JsonObject:
        session = self.sessions.pop(str(params.get("sessionId")), None)
        if session is not None:
            await session.close()
        return {}


def _store_id(params: JsonObject) -> str | None:
    """The store's id of a session acpctl asks pi to start afresh for (a lost one's
    stand-in): pi's files then go into that session's own directory."""
    meta = params.get("_meta")
    acpctl_meta = meta.get("acpctl") if isinstance(meta, dict) else None
    hinted = acpctl_meta.get("sessionId") if isinstance(acpctl_meta, dict) else None
    return hinted if valid_session_id(hinted) else None
