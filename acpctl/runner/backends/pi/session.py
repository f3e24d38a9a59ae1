"""One ACP session with pi: its child (started in the session's cwd, on session files in the
directory the store hands out), its restarts, its tools announced so far, its cancellation,
and what the editor is told besides the turns: the model and thinking level as config
options, pi's commands, the context usage after each turn, the title."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol

from acpctl import paths
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.backends.pi import translate as pt
from acpctl.runner.backends.pi.child import PiChild
from acpctl.runner.backends.pi.turn import Turn
from acpctl.runner.supervisor import RestartPolicy
from acpctl.sandbox import Policy, launch
from acpctl.store.sessions import title_from_text

NO_GATE_VARIABLE = "ACPCTL_NO_PERMISSION_GATE"
_TOOL_MARK = re.compile(r"\[acpctl:([^\]]+)\]")


def gate_extension() -> str:
    """The pi extension that asks before write, edit and bash (shipped in the package)."""
    from importlib import resources

    return str(resources.files("acpctl.runner.backends.pi").joinpath("permission_gate.ts"))


class SessionHost(Protocol):
    """What a session needs of the backend (`PiRpcBackend`)."""

    argv: list[str]
    env: dict[str, str]
    log: logging.Logger
    sandbox: Policy | None

    def emit(self, session_id: str, update: JsonObject) -> None: ...
    def ask_permission(self, session: PiSession, child: PiChild, request: JsonObject) -> None: ...
    def spawn(self, work: Coroutine[Any, Any, None]) -> None: ...


class PiSession:
    def __init__(self, backend: SessionHost, session_id: str, cwd: str, directory: Path) -> None:
        self.backend = backend
        self.id = session_id
        self.cwd = cwd
        self.directory = directory
        self.child: PiChild | None = None
        self.restarts = RestartPolicy()
        self.prompting = False
        self.cancel_generation = 0
        self.announced: dict[str, tuple[str, JsonObject]] = {}  # tool id -> (name, args)
        self.before: dict[str, JsonObject] = {}  # tool id -> diff of the file before it ran
        self.accepts_images = False
        self.pi_state: JsonObject = {}
        self.models: list[JsonObject] = []
        self.starting: asyncio.Task[None] | None = None  # pi resuming in the background
        self.title: str | None = None

    async def start(self, resume: bool) -> None:
        argv = [*self.backend.argv, "--session-dir", str(self.directory)]
        if resume:
            argv.append("--continue")
        if not os.environ.get(NO_GATE_VARIABLE) and not self.backend.env.get(NO_GATE_VARIABLE):
            argv += ["--extension", gate_extension()]
        env = self.backend.env
        if self.backend.sandbox is not None:
            # In the session's directory, with its session file (in acpctl's hidden store).
            argv, env = launch(self.backend.sandbox, argv, env, self.cwd, [self.directory])
        child = PiChild(argv, env, self.cwd, self.backend.log)
        try:
            state = await child.start()
        except OSError as exc:
            raise RpcError(
                acp.INTERNAL_ERROR, f"cannot start pi ({argv[0]}): {exc.strerror or exc}"
            ) from exc
        self._took_state(state)
        self.child = child

    async def renew(self) -> None:
        """A session afresh in the running pi (its `new_session`): what pi reads when a
        session starts (settings, models, extensions, context files) is read again."""
        assert self.child is not None
        await self.child.command("new_session")
        self._took_state(await self.child.command("get_state"))

    def _took_state(self, state: Any) -> None:
        self.pi_state = state if isinstance(state, dict) else {}
        model = self.pi_state.get("model")
        self.accepts_images = isinstance(model, dict) and "image" in (model.get("input") or [])

    # -- what the editor is told besides the turns ----------------------------------------

    async def describe(self) -> JsonObject:
        """The session/new (or resume) result's state: pi's model and thinking level."""
        child = await self.ensure_child()
        try:
            answer = await child.command("get_available_models")
        except RpcError as exc:
            self.backend.log.info("pi: get_available_models failed: %s", exc.message)
            answer = None
        models = answer.get("models") if isinstance(answer, dict) else None
        self.models = [m for m in models or [] if isinstance(m, dict)]
        return {"configOptions": pt.config_options(self.pi_state, self.models)}

    async def set_config(self, config_id: Any, value: Any) -> JsonObject:
        command, fields = pt.config_command(config_id, value)
        child = await self.ensure_child()
        await child.command(command, **fields)
        self._took_state(await child.command("get_state"))
        return {"configOptions": pt.config_options(self.pi_state, self.models)}

    async def commands(self) -> Any:
        """pi's answer to get_commands, None when it has none. Asked beside get_available_
        models, before session/new answers: pi answers one command at a time, and a first
        prompt sent the moment the session is known would otherwise wait behind it."""
        child = await self.ensure_child()
        try:
            return await child.command("get_commands")
        except RpcError as exc:
            self.backend.log.info("pi: get_commands failed: %s", exc.message)
            return None

    def introduce(self, commands: Any) -> None:
        """After the session is known to the editor: pi's commands, and its name if pi has
        one."""
        if commands is not None:
            self.emit(pt.available_commands(commands))
        name = self.pi_state.get("sessionName")
        if isinstance(name, str) and name:
            self._retitle(name)

    async def report_usage(self) -> None:
        """After a turn: the context used, and the cost so far."""
        if self.child is None or not self.child.alive:
            return
        with contextlib.suppress(RpcError):
            update = pt.usage(await self.child.command("get_session_stats"))
            if update is not None:
                self.emit(update)

    def _retitle(self, title: str) -> None:
        if title != self.title:
            self.title = title
            self.emit({"sessionUpdate": acp.SESSION_INFO_UPDATE, "title": title})

    def resume_in_background(self, continued: bool) -> None:
        """pi starts (on its session file, when `continued`) while the editor already has
        acpctl's replay: the first request that needs pi waits for it."""
        self.starting = asyncio.ensure_future(self.start(resume=continued))

    async def ensure_child(self) -> PiChild:
        if self.starting is not None:
            try:
                await asyncio.shield(self.starting)  # every waiter shares the one start
            finally:
                if self.starting is not None and self.starting.done():
                    self.starting = None
        if self.child is not None and self.child.alive:
            return self.child
        delay = self.restarts.next_delay()
        if delay is None:
            raise RpcError(acp.INTERNAL_ERROR, self.restarts.refusal("pi"))
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
            child = await self.ensure_child()
            text, images, dropped = pt.prompt_input(blocks, self.accepts_images)
            title = title_from_text(text)
            if self.title is None and title:
                self._retitle(title)
            for note in dropped:
                self.backend.log.info("session %s: dropped %s from the prompt", self.id, note)
            generation = self.cancel_generation
            turn = Turn(self, child)
            await turn.run(text, images)
        finally:
            self.prompting = False
            paths.tighten(self.directory)  # pi writes its files with its own umask
            self.backend.spawn(self.report_usage())  # off the response's path
        if self.cancel_generation != generation:
            return {"stopReason": acp.CANCELLED}
        reason, error = pt.stop_reason(turn.last_assistant)
        if reason is None:
            raise RpcError(acp.INTERNAL_ERROR, f"pi: {error}")
        if turn.usage and "totalTokens" in turn.usage:
            return {"stopReason": reason, "usage": turn.usage}
        return {"stopReason": reason}

    # -- for the turn ---------------------------------------------------------------------

    def announce(self, tool_id: str, name: str, args: JsonObject, status: str) -> None:
        self.announced[tool_id] = (name, args)
        self.emit(pt.tool_call(tool_id, name, args, status, self.cwd))

    def tool_started(self, tool_id: str, name: str, args: JsonObject) -> None:
        before = pt.planned_diff(name, args, self.cwd)
        if before is not None:
            self.before[tool_id] = before
        if tool_id in self.announced:
            self.emit(pt.tool_call(tool_id, name, args, "in_progress", self.cwd, update=True))
        else:
            self.announce(tool_id, name, args, "in_progress")

    def dialog(self, child: PiChild, request: JsonObject) -> None:
        method = request.get("method")
        if method in ("confirm", "select"):
            self.backend.ask_permission(self, child, request)
        elif method in ("input", "editor"):
            child.send(
                {"type": "extension_ui_response", "id": request.get("id"), "cancelled": True}
            )
            self.emit(
                pt.chunk(
                    acp.AGENT_MESSAGE_CHUNK,
                    f"\n(acpctl: pi asked for {method} input "
                    f'"{request.get("title", "")}", which ACP cannot show; '
                    "cancelled)\n",
                )
            )
        elif method == "notify":
            self.emit(pt.chunk(acp.AGENT_MESSAGE_CHUNK, f"\n{request.get('message', '')}\n"))
        elif method == "setTitle" and request.get("title"):
            self._retitle(str(request["title"]))

    def permission_tool(self, request: JsonObject) -> JsonObject:
        mark = _TOOL_MARK.search(str(request.get("message", "")))
        tool_id = mark.group(1) if mark else next(reversed(self.announced), "pi-dialog")
        name, args = self.announced.get(tool_id, ("other", {}))
        tool: JsonObject = {
            "toolCallId": tool_id,
            "title": pt.tool_title(name, args)
            if name != "other"
            else str(request.get("title", "")),
            "kind": pt.TOOL_KINDS.get(name, "other"),
            "status": "pending",
        }
        diff = pt.planned_diff(name, args, self.cwd)
        if diff is not None:
            tool["content"] = [diff]
        return tool

    def cancel(self) -> None:
        self.cancel_generation += 1
        if self.child is not None and self.child.alive:
            self.child.send({"type": "abort"})

    async def close(self) -> None:
        if self.starting is not None:
            self.starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, RpcError):
                await self.starting
            self.starting = None
        if self.child is not None:
            await self.child.stop()
            self.child = None
        paths.tighten(self.directory)
