"""An ACP agent written with the official Python SDK's agent side, for tests.

Behaviour is chosen with environment variables:
  SDK_AGENT_LOAD=1     advertise loadSession and replay history on session/load
                       (acpctl must suppress that replay)
  SDK_AGENT_STATE=DIR  remember each session's prompts in DIR (so a load can replay them)
  SDK_AGENT_FORK=1     advertise and implement session/fork
  SDK_AGENT_LIST=1     advertise session/list: the sessions remembered in SDK_AGENT_STATE

Every session has two modes (ask, code) and a config option `effort` (low, high); a prompt
is answered with them when they are not the defaults ("sdk[code,high]: ..."). "crash"
ends the process (status 3); "mcp" is answered with the MCP servers session/new gave.

Each prompt is answered with "sdk: <text>" in one chunk; "ask" asks for permission first;
"files DIR" reads DIR/in.txt and writes DIR/out.txt through the client; "term" runs
`echo hello` in a client terminal and reports its output.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any, cast

import acp
from acp import (
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    text_block,
    update_agent_message,
    update_user_message,
)
from acp.schema import (
    AgentCapabilities,
    ForkSessionResponse,
    Implementation,
    ListSessionsResponse,
    PermissionOption,
    SessionCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    ToolCallUpdate,
)

LOAD = os.environ.get("SDK_AGENT_LOAD") == "1"
FORK = os.environ.get("SDK_AGENT_FORK") == "1"
LIST = os.environ.get("SDK_AGENT_LIST") == "1"
STATE = Path(os.environ.get("SDK_AGENT_STATE", "/nonexistent"))


def modes(current: str) -> SessionModeState:
    return SessionModeState(
        current_mode_id=current,
        available_modes=[SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code")],
    )


def effort(current: str) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
    return [
        SessionConfigOptionSelect(
            id="effort",
            name="Effort",
            type="select",
            current_value=current,
            options=[
                SessionConfigSelectOption(value="low", name="Low"),
                SessionConfigSelectOption(value="high", name="High"),
            ],
        )
    ]


class SdkAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.mode: dict[str, str] = {}
        self.effort: dict[str, str] = {}
        self.mcp: dict[str, list[str]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(
                load_session=LOAD,
                session_capabilities=SessionCapabilities(
                    fork=SessionForkCapabilities() if FORK else None,
                    list=SessionListCapabilities() if LIST else None,
                ),
            ),
            agent_info=Implementation(name="sdk-test-agent", version="1.0.0"),
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"sdk-{uuid.uuid4().hex[:12]}"
        self._open(session_id, cwd)
        self.mcp[session_id] = [
            f"{server.name}:{getattr(server, 'command', None) or getattr(server, 'url', '')}"
            for server in mcp_servers or []
        ]
        return NewSessionResponse(
            session_id=session_id, modes=modes("ask"), config_options=effort("low")
        )

    def _open(self, session_id: str, cwd: str) -> None:
        self.cancelled[session_id] = asyncio.Event()
        self.mode.setdefault(session_id, "ask")
        self.effort.setdefault(session_id, "low")
        if STATE.is_dir() and not (STATE / f"{session_id}.cwd").exists():
            (STATE / f"{session_id}.cwd").write_text(cwd)

    async def fork_session(self, session_id: str, cwd: str, **kwargs: Any) -> ForkSessionResponse:
        fork_id = f"sdk-{uuid.uuid4().hex[:12]}"
        parent = STATE / f"{session_id}.json"
        if STATE.is_dir() and parent.exists():
            (STATE / f"{fork_id}.json").write_text(parent.read_text())
        self.mode[fork_id] = self.mode.get(session_id, "ask")
        self.effort[fork_id] = self.effort.get(session_id, "low")
        self._open(fork_id, cwd)
        return ForkSessionResponse(
            session_id=fork_id,
            modes=modes(self.mode[fork_id]),
            config_options=effort(self.effort[fork_id]),
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        found = []
        for path in sorted(STATE.glob("*.cwd")) if STATE.is_dir() else []:
            if cwd is None or path.read_text() == cwd:
                found.append(
                    SessionInfo(
                        session_id=path.stem, cwd=path.read_text(), title=f"made by sdk {path.stem}"
                    )
                )
        return ListSessionsResponse(sessions=found)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self.mode[session_id] = mode_id

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        self.effort[session_id] = str(value)
        return SetSessionConfigOptionResponse(config_options=effort(str(value)))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        path = STATE / f"{session_id}.json"
        if not path.exists():
            raise acp.RequestError(-32002, f"no such session {session_id}")
        for text in json.loads(path.read_text()):
            await self.conn.session_update(session_id, update_user_message(text_block(text)))
            await self.conn.session_update(
                session_id, update_agent_message(text_block(f"sdk: {text}"))
            )
        self._open(session_id, cwd)
        return LoadSessionResponse(modes=modes(self.mode[session_id]))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(b, "text", "") for b in prompt)
        if session_id not in self.cancelled:
            raise acp.RequestError(-32002, f"unknown session {session_id}")
        if text == "crash":
            os._exit(3)
        if text == "mcp":  # the MCP servers the session was given
            text = "mcp " + ",".join(self.mcp.get(session_id, []))
        if "ask" in text:
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="t1", title="ask"),
                options=[PermissionOption(option_id="ok", name="OK", kind="allow_once")],
            )
            text += f" [{answer.outcome.outcome}]"
        if text.startswith("files "):
            directory = text.split(" ", 1)[1].strip()
            read = await self.conn.read_text_file(path=f"{directory}/in.txt", session_id=session_id)
            await self.conn.write_text_file(
                content=read.content.upper(), path=f"{directory}/out.txt", session_id=session_id
            )
            try:
                await self.conn.read_text_file(path="/etc/hostname", session_id=session_id)
                text += " [outside allowed]"
            except acp.RequestError as exc:
                text += f" [outside refused: {exc.code}]"
        if text == "term":
            created = await self.conn.create_terminal(
                command="echo", args=["hello"], session_id=session_id
            )
            exit_status = await self.conn.wait_for_terminal_exit(
                session_id=session_id, terminal_id=created.terminal_id
            )
            output = await self.conn.terminal_output(
                session_id=session_id, terminal_id=created.terminal_id
            )
            await self.conn.release_terminal(session_id=session_id, terminal_id=created.terminal_id)
            text += f" [{output.output.strip()} exit={exit_status.exit_code}]"
        if STATE.is_dir():
            path = STATE / f"{session_id}.json"
            done = json.loads(path.read_text()) if path.exists() else []
            path.write_text(json.dumps([*done, text]))
        state = (self.mode[session_id], self.effort[session_id])
        tag = "" if state == ("ask", "low") else f"[{','.join(state)}]"
        await self.conn.session_update(
            session_id, update_agent_message(text_block(f"sdk{tag}: {text}"))
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.cancelled:
            self.cancelled[session_id].set()


if __name__ == "__main__":
    # SdkAgent has the methods the SDK dispatches to; its Agent protocol lists more.
    asyncio.run(acp.run_agent(cast(Any, SdkAgent()), use_unstable_protocol=True))
