"""The client side of ACP for the terminal: permission policy, files, terminals.

What an editor provides to an agent, done for real: fs/read_text_file and
fs/write_text_file confined to the session's directories, and terminal/* running real
subprocesses (no shell) with output limits: in the agent's sandbox when it has one.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acpctl import processes
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.sandbox import Policy
from acpctl.sandbox import launch as sandbox_launch
from acpctl.terminal import beneath

READ_KINDS = {"read", "search", "think", "fetch"}
DEFAULT_OUTPUT_LIMIT = 1024 * 1024

Asker = Callable[[JsonObject], Awaitable[str | None]]  # -> optionId, or None to cancel
# elicitation/create's params -> its result (terminal/forms.py)
Elicitor = Callable[[JsonObject], Awaitable[JsonObject]]


@dataclass
class Terminal:
    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    def status(self) -> JsonObject | None:
        code = self.process.returncode
        if code is None:
            return None
        return (
            {"exitCode": code, "signal": None}
            if code >= 0
            else {"exitCode": None, "signal": f"SIG{-code}"}
        )


def _why(exc: Exception) -> str:
    """What went wrong, said for the agent: a link met on the way is a path changed since
    it was checked."""
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "it changed while being opened (a symbolic link on its way): refused"
    return str(exc)


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _requested_env(said: object) -> dict[str, str]:
    """terminal/create's env: names a shell could set, values without NUL (else the
    request is refused: nothing the agent sends is passed on unchecked)."""
    if said is None:
        return {}
    if not isinstance(said, list):
        raise RpcError(acp.INVALID_PARAMS, "env must be a list of {name, value}")
    env = {}
    for variable in said:
        name = variable.get("name") if isinstance(variable, dict) else None
        value = variable.get("value", "") if isinstance(variable, dict) else None
        if not isinstance(name, str) or not _VARIABLE_NAME.fullmatch(name):
            raise RpcError(acp.INVALID_PARAMS, f"env: {name!r} is not a variable's name")
        if not isinstance(value, str) or "\0" in value:
            raise RpcError(acp.INVALID_PARAMS, f"env: {name}'s value must be text without NUL")
        env[name] = value
    return env


class ClientHost:
    """Answers the agent's requests to the client for one terminal session."""

    def __init__(
        self,
        roots: list[str],
        policy: str,
        ask: Asker | None = None,
        sandbox: Policy | None = None,
        elicit: Elicitor | None = None,
    ) -> None:
        """`elicit`: who answers the agent's questions (forms, URLs); None: there is no
        one to ask, and the client does not say it can."""
        self.roots = [Path(r).resolve() for r in roots]
        self.sandbox = sandbox  # the agent's: its terminal commands run in it too
        self.policy = policy
        self.ask = ask
        self.elicit = elicit
        self.always_allowed: set[str] = set()  # tool kinds allowed for the session
        self.denied = 0  # tool calls denied this turn
        self.terminals: dict[str, Terminal] = {}
        self._ids = itertools.count(1)

    def capabilities(self) -> JsonObject:
        capabilities: JsonObject = {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
            # a remote agent's link says when it drops and comes back (the status line);
            # a replay brings who answered the agent's questions (sessions attach shows it)
            "_meta": {acp.LINK_STATE_META: True, acp.RECORDED_META: True},
        }
        if self.elicit is not None:
            capabilities["elicitation"] = {"form": {}, "url": {}}
        return capabilities

    async def handle(self, method: str, params: JsonObject) -> Any:
        handlers: dict[str, Callable[[JsonObject], Awaitable[Any]]] = {
            acp.REQUEST_PERMISSION: self.request_permission,
            acp.ELICITATION_CREATE: self.create_elicitation,
            acp.FS_READ_TEXT_FILE: self.read_text_file,
            acp.FS_WRITE_TEXT_FILE: self.write_text_file,
            acp.TERMINAL_CREATE: self.terminal_create,
            acp.TERMINAL_OUTPUT: self.terminal_output,
            acp.TERMINAL_WAIT_FOR_EXIT: self.terminal_wait,
            acp.TERMINAL_KILL: self.terminal_kill,
            acp.TERMINAL_RELEASE: self.terminal_release,
        }
        handler = handlers.get(method)
        if handler is None:
            raise RpcError(acp.METHOD_NOT_FOUND, f"method not found: {method}")
        return await handler(params)

    # -- permissions ----------------------------------------------------------------

    async def request_permission(self, params: JsonObject) -> JsonObject:
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        raw_tool = params.get("toolCall")
        tool: JsonObject = raw_tool if isinstance(raw_tool, dict) else {}
        kind = str(tool.get("kind") or "other")

        def pick(*kinds: str) -> str | None:
            return next((o["optionId"] for o in options if o.get("kind") in kinds), None)

        allow = pick(acp.ALLOW_ONCE, acp.ALLOW_ALWAYS)
        reject = pick(acp.REJECT_ONCE, acp.REJECT_ALWAYS)
        choice: str | None
        if kind in self.always_allowed or self.policy == "approve-all":
            choice = allow
        elif self.policy == "approve-reads":
            choice = allow if kind in READ_KINDS else reject
        elif self.policy == "deny-all":
            choice = reject
        else:
            assert self.ask is not None
            choice = await self.ask(params)
            chosen = next((o for o in options if o.get("optionId") == choice), None)
            if chosen and chosen.get("kind") == acp.ALLOW_ALWAYS:
                self.always_allowed.add(kind)
        if choice is None:
            return {"outcome": {"outcome": acp.CANCELLED}}
        if choice == reject or next(
            (
                o
                for o in options
                if o.get("optionId") == choice and str(o.get("kind", "")).startswith("reject")
            ),
            None,
        ):
            self.denied += 1
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def create_elicitation(self, params: JsonObject) -> JsonObject:
        """The agent's question, for the person; cancelled when there is no one to ask (an
        agent should not ask then: the capability was not offered)."""
        if self.elicit is None:
            return {"action": "cancel"}
        return await self.elicit(params)

    def denied_note(self) -> str:
        """Why the run ends with exit 5: who denied, and which flag allows."""
        count = f"{self.denied} tool call{'s' if self.denied > 1 else ''}"
        if self.policy == "ask":
            return f"{count} denied at your answer; --approve-all allows every tool call"
        return (
            f"{count} denied by --{self.policy}"
            + (
                " (the default without a terminal to ask on)"
                if self.policy == "approve-reads"
                else ""
            )
            + "; --approve-all allows every tool call"
        )

    # -- files ----------------------------------------------------------------------

    def _confined(self, path: Any) -> Path:
        """`path` resolved, once checked to lie in the session's roots and not in what the
        sandbox hides. It is then opened through no link (beneath.py): a path changed
        after this check is refused, not followed."""
        if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
            raise RpcError(acp.INVALID_PARAMS, "path must be an absolute path")
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError) as exc:  # a link loop, a name too long
            raise RpcError(acp.INVALID_PARAMS, f"cannot resolve {path}: {exc}") from exc
        if not any(resolved == root or root in resolved.parents for root in self.roots):
            raise RpcError(
                acp.INVALID_PARAMS,
                f"{path} is outside the session's directories ({', '.join(map(str, self.roots))})",
            )
        if self.sandbox is not None and self.sandbox.hides(resolved):
            # The agent's sandbox hides it from the agent; acpctl must not hand it over.
            raise RpcError(acp.INVALID_PARAMS, f"{path} is hidden by the agent's sandbox")
        return resolved

    async def read_text_file(self, params: JsonObject) -> JsonObject:
        path = self._confined(params.get("path"))
        try:
            text = beneath.read_bytes(path).decode("utf-8")
        except FileNotFoundError as exc:
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"no such file: {path}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise RpcError(acp.INTERNAL_ERROR, f"cannot read {path}: {_why(exc)}") from exc
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = start + limit if isinstance(limit, int) else None
            text = "".join(lines[start:end])
        return {"content": text}

    async def write_text_file(self, params: JsonObject) -> JsonObject:
        path = self._confined(params.get("path"))
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(acp.INVALID_PARAMS, "content must be a string")
        try:
            beneath.write_bytes(path, content.encode("utf-8"))
        except (OSError, UnicodeEncodeError) as exc:
            raise RpcError(acp.INTERNAL_ERROR, f"cannot write {path}: {_why(exc)}") from exc
        return {}

    # -- terminals ------------------------------------------------------------------

    async def terminal_create(self, params: JsonObject) -> JsonObject:
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str) or not all(isinstance(a, str) for a in args):
            raise RpcError(acp.INVALID_PARAMS, "command must be a string, args strings")
        cwd = params.get("cwd")
        cwd_path = self._confined(cwd) if cwd is not None else self.roots[0]
        requested = _requested_env(params.get("env"))
        limit = params.get("outputByteLimit")
        limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_OUTPUT_LIMIT
        argv = [command, *args]
        env: dict[str, str]
        if self.sandbox is not None:
            # What the agent asks for is set inside the sandbox only: the engine runs by
            # its own path, in an environment acpctl builds (sandbox.launch).
            argv, env = sandbox_launch(
                self.sandbox, argv, {}, str(cwd_path), (), requested, agents_argv=True
            )
        else:
            env = {**os.environ, **requested}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd_path,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            raise RpcError(acp.INTERNAL_ERROR, f"cannot run {command}: {exc}") from exc
        terminal = Terminal(process, limit)
        terminal.reader = asyncio.create_task(self._collect(terminal))
        terminal_id = f"term-{next(self._ids)}"
        self.terminals[terminal_id] = terminal
        return {"terminalId": terminal_id}

    async def _collect(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(65536):
            terminal.output += chunk
            if len(terminal.output) > terminal.limit:
                # The spec keeps the end of the output: truncate from the beginning, on a
                # character boundary.
                cut = len(terminal.output) - terminal.limit
                while cut < len(terminal.output) and terminal.output[cut] & 0xC0 == 0x80:
                    cut += 1
                del terminal.output[:cut]
                terminal.truncated = True

    def _terminal(self, params: JsonObject) -> Terminal:
        terminal = self.terminals.get(str(params.get("terminalId")))
        if terminal is None:
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"unknown terminal {params.get('terminalId')}")
        return terminal

    async def terminal_output(self, params: JsonObject) -> JsonObject:
        terminal = self._terminal(params)
        result: JsonObject = {
            "output": terminal.output.decode("utf-8", "replace"),
            "truncated": terminal.truncated,
        }
        status = terminal.status()
        if status is not None:
            result["exitStatus"] = status
        return result

    async def terminal_wait(self, params: JsonObject) -> JsonObject:
        terminal = self._terminal(params)
        await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader
        return terminal.status() or {}

    async def terminal_kill(self, params: JsonObject) -> JsonObject:
        terminal = self._terminal(params)
        if terminal.process.returncode is None:
            processes.kill_group(terminal.process.pid)
        return {}

    async def terminal_release(self, params: JsonObject) -> JsonObject:
        await self.terminal_kill(params)
        self.terminals.pop(str(params.get("terminalId")), None)
        return {}

    async def close(self) -> None:
        for terminal_id in list(self.terminals):
            await self.terminal_release({"terminalId": terminal_id})
