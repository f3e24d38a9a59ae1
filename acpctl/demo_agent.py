"""The built-in `demo` agent: a small, real ACP agent that needs no model and no network.

It answers every prompt by echoing it back in streamed chunks. Words in the prompt ask for
more of the protocol, so editors, tests, `doctor` and the benchmarks can exercise it:

    think       a thought before the answer
    plan        a plan update
    edit        a tool call with a diff that asks for permission first
    run: CMD    a command tool call ("Bash") that asks for permission to run CMD (the rest
                of the prompt), with a standing "always allow" among the options; the
                demo agent runs nothing
    ask         a question (a form elicitation: a name, and whether to be excited), when
                the client said it can answer forms
    visit       a URL to open (a URL elicitation, then elicitation/complete), when the
                client said it can open URLs
    title       a session_info_update with a title
    slow        a slow stream (20 chunks, 100 ms apart), good for trying cancel
    crash       dies in the middle of the turn (exit status 3)
    flood N     N tiny message chunks as fast as possible, written as they are made
                (benchmarks: a fast stream, which a relay can pass on while it flows)
    burst N     the same N chunks in one write when all are made (benchmarks: a relay
                can only start on them once the agent has finished)

Two modes (`echo`, and `shout`, which answers in capitals) and one config option (`tone`:
`plain`, or `excited`, which ends the answer with "!") let editors and tests exercise
session state. It supports session/resume of a session it holds (after a restart it holds
none: acpctl then opens a fresh one, as for any agent) but not session/load. Each
prompt's response reports its tokens (a token a word). Run it directly with
`python -m acpctl.demo_agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from acpctl import __version__, jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.streams import Output, open_input

MODES = (("echo", "Echo"), ("shout", "Shout"))
FLOOD_WRITE_EVERY = 64  # chunks
TONES = (("plain", "Plain"), ("excited", "Excited"))


@dataclass
class DemoSession:
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    mode: str = "echo"
    tone: str = "plain"

    def state(self) -> JsonObject:
        return {
            "modes": {
                "currentModeId": self.mode,
                "availableModes": [{"id": mode, "name": name} for mode, name in MODES],
            },
            "configOptions": [
                {
                    "id": "tone",
                    "name": "Tone",
                    "type": "select",
                    "currentValue": self.tone,
                    "options": [{"value": tone, "name": name} for tone, name in TONES],
                }
            ],
        }


class DemoAgent:
    def __init__(self, output: Output) -> None:
        self.out = output
        self.peer: Peer[int] = Peer(output.write)  # the editor, for requests of our own
        self.sessions: dict[str, DemoSession] = {}
        self.tool_ids = itertools.count(1)
        self.elicitation: JsonObject = {}  # what the client can answer: form, url

    # -- plumbing ---------------------------------------------------------------------

    def update(self, session_id: str, update: JsonObject) -> None:
        self.out.send(
            jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        )

    def chunk(self, session_id: str, text: str, kind: str = acp.AGENT_MESSAGE_CHUNK) -> None:
        self.update(session_id, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    async def call_client(self, method: str, params: JsonObject) -> JsonObject:
        future = self.peer.call(method, params)
        await self.out.drain()
        return await future

    # -- methods ----------------------------------------------------------------------

    async def initialize(self, params: JsonObject) -> JsonObject:
        capabilities = params.get("clientCapabilities")
        elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
        self.elicitation = elicitation if isinstance(elicitation, dict) else {}
        return {
            "protocolVersion": acp.PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "sessionCapabilities": {"resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "acpctl-demo", "title": "acpctl demo", "version": __version__},
        }

    def _session(self, params: JsonObject) -> str:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or session_id not in self.sessions:
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"unknown session {session_id!r}")
        return session_id

    async def new_session(self, params: JsonObject) -> JsonObject:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(acp.INVALID_PARAMS, "cwd must be an absolute path")
        session_id = f"demo-{uuid.uuid4().hex}"
        session = self.sessions[session_id] = DemoSession()
        return {"sessionId": session_id, **session.state()}

    async def resume_session(self, params: JsonObject) -> JsonObject:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise RpcError(acp.INVALID_PARAMS, "sessionId is required")
        if session_id not in self.sessions:  # never its: an agent says so, not a fresh one
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"no session {session_id}")
        return self.sessions[session_id].state()

    async def close_session(self, params: JsonObject) -> JsonObject:
        session_id = self._session(params)
        self.sessions.pop(session_id).cancelled.set()
        return {}

    async def set_mode(self, params: JsonObject) -> JsonObject:
        session = self.sessions[self._session(params)]
        if not isinstance(params.get("modeId"), str) or params["modeId"] not in dict(MODES):
            raise RpcError(acp.INVALID_PARAMS, f"unknown mode {params.get('modeId')!r}")
        session.mode = params["modeId"]
        return {}

    async def set_config_option(self, params: JsonObject) -> JsonObject:
        session = self.sessions[self._session(params)]
        value = params.get("value")
        if (
            params.get("configId") != "tone"
            or not isinstance(value, str)
            or value not in dict(TONES)
        ):
            raise RpcError(acp.INVALID_PARAMS, "the option is tone: plain or excited")
        session.tone = params["value"]
        return {"configOptions": session.state()["configOptions"]}

    async def cancel(self, params: JsonObject) -> None:
        session = self.sessions.get(params.get("sessionId", ""))
        if session is not None:
            session.cancelled.set()

    async def prompt(self, params: JsonObject) -> JsonObject:
        session_id = self._session(params)
        cancelled = self.sessions[session_id].cancelled
        cancelled.clear()
        text = _prompt_text(params.get("prompt", []))
        words = set(re.findall(r"[a-z]+", text.lower()))
        if flood := re.search(r"\b(flood|burst) (\d+)", text):
            for sent in range(1, int(flood.group(2)) + 1):
                self.chunk(session_id, ".")
                if flood.group(1) == "flood" and sent % FLOOD_WRITE_EVERY == 0:
                    await asyncio.sleep(0)  # the output is written once a loop turn
            return {"stopReason": acp.END_TURN}
        self.extras(session_id, text, words)
        if "edit" in words:
            stop = await self.edit(session_id)
            if stop is not None:
                return {"stopReason": stop}
        if "run:" in text:
            await self.command(session_id, text.split("run:", 1)[1].strip())
        if "ask" in words:
            await self.ask(session_id)
        if "visit" in words:
            await self.visit(session_id)
        await self.echo(session_id, text, words, cancelled)
        stop = acp.CANCELLED if cancelled.is_set() else acp.END_TURN
        return {"stopReason": stop, "usage": self.usage(text)}

    @staticmethod
    def usage(text: str) -> JsonObject:
        """The turn's tokens as a model would count them: a word each, the echo as long as
        the prompt (no usage_update: an echo costs nothing and has no context window)."""
        tokens = len(text.split())
        return {"inputTokens": tokens, "outputTokens": tokens, "totalTokens": 2 * tokens}

    def extras(self, session_id: str, text: str, words: set[str]) -> None:
        """What the words `title`, `think` and `plan` ask for."""
        if "title" in words:
            self.update(
                session_id,
                {"sessionUpdate": acp.SESSION_INFO_UPDATE, "title": f"Demo: {text[:40]}"},
            )
        if "think" in words:
            self.chunk(session_id, "The user wants an echo; I will echo.", acp.AGENT_THOUGHT_CHUNK)
        if "plan" in words:
            self.update(
                session_id,
                {
                    "sessionUpdate": acp.PLAN,
                    "entries": [
                        {"content": "Read the prompt", "priority": "high", "status": "completed"},
                        {"content": "Echo it back", "priority": "medium", "status": "in_progress"},
                    ],
                },
            )

    async def echo(
        self, session_id: str, text: str, words: set[str], cancelled: asyncio.Event
    ) -> None:
        """The answer, a word a chunk (`slow`: 20 chunks 100 ms apart; `crash`: exit 3
        after the first)."""
        session = self.sessions[session_id]
        answer = f"You said: {text}" + ("!" if session.tone == "excited" else "")
        if session.mode == "shout":
            answer = answer.upper()
        pieces = re.findall(r"\S+\s*", answer) or ["You said nothing."]
        slow = "slow" in words
        if slow:
            pieces = (pieces * 20)[:20]
        for index, piece in enumerate(pieces):
            if cancelled.is_set():
                return
            self.chunk(session_id, piece)
            if "crash" in words and index == 0:
                await self.out.drain()
                print("demo agent: crashing on request", file=sys.stderr, flush=True)
                os._exit(3)
            if slow:
                await self.out.drain()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(cancelled.wait(), 0.1)

    async def edit(self, session_id: str) -> str | None:
        """A tool call with a diff, gated by a permission request. Returns a stop reason
        when the turn must end early."""
        tool_id = f"edit-{next(self.tool_ids)}"
        diff = {
            "type": "diff",
            "path": "/tmp/demo.txt",
            "oldText": "hello\n",
            "newText": "hello, world\n",
        }
        self.update(
            session_id,
            {
                "sessionUpdate": acp.TOOL_CALL,
                "toolCallId": tool_id,
                "title": "Edit /tmp/demo.txt",
                "kind": "edit",
                "status": "pending",
                "content": [diff],
                "locations": [{"path": "/tmp/demo.txt", "line": 1}],
            },
        )
        answer = await self.call_client(
            acp.REQUEST_PERMISSION,
            {
                "sessionId": session_id,
                "toolCall": {
                    "toolCallId": tool_id,
                    "title": "Edit /tmp/demo.txt",
                    "kind": "edit",
                    "content": [diff],  # what it would do, for the person asked
                },
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": acp.ALLOW_ONCE},
                    {"optionId": "reject", "name": "Reject", "kind": acp.REJECT_ONCE},
                ],
            },
        )
        outcome = answer.get("result", {}).get("outcome", {}) if "result" in answer else {}
        if outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow":
            status = "completed"
        else:
            status = "failed"
        self.update(
            session_id,
            {"sessionUpdate": acp.TOOL_CALL_UPDATE, "toolCallId": tool_id, "status": status},
        )
        if outcome.get("outcome") == "cancelled" or self.sessions[session_id].cancelled.is_set():
            return acp.CANCELLED
        return None

    async def command(self, session_id: str, command: str) -> None:
        """A command the agent would run, asked of the person first (it runs nothing)."""
        tool_id = f"run-{next(self.tool_ids)}"
        tool = {
            "toolCallId": tool_id,
            "title": "Bash",
            "kind": "execute",
            "rawInput": {"command": command},
        }
        self.update(session_id, {"sessionUpdate": acp.TOOL_CALL, **tool, "status": "pending"})
        answer = await self.call_client(
            acp.REQUEST_PERMISSION,
            {
                "sessionId": session_id,
                "toolCall": tool,
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": acp.ALLOW_ONCE},
                    {"optionId": "always", "name": "Always allow", "kind": acp.ALLOW_ALWAYS},
                    {"optionId": "reject", "name": "Reject", "kind": acp.REJECT_ONCE},
                ],
            },
        )
        outcome = answer.get("result", {}).get("outcome", {}) if "result" in answer else {}
        allowed = outcome.get("optionId") in ("allow", "always")
        status = "completed" if allowed else "failed"
        self.update(
            session_id,
            {"sessionUpdate": acp.TOOL_CALL_UPDATE, "toolCallId": tool_id, "status": status},
        )

    async def ask(self, session_id: str) -> None:
        """A form: the answer is said back (`excited`: with "!")."""
        if self.elicitation.get("form") is None:
            self.chunk(session_id, "(Your client cannot answer questions.) ")
            return
        answer = await self.call_client(
            acp.ELICITATION_CREATE,
            {
                "sessionId": session_id,
                "mode": "form",
                "message": "What should the demo call you?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "title": "Your name", "minLength": 1},
                        "excited": {"type": "boolean", "title": "Excited?", "default": False},
                    },
                    "required": ["name"],
                },
            },
        )
        result = _object(answer.get("result"))
        content = _object(result.get("content"))
        if result.get("action") == "accept" and isinstance(content.get("name"), str):
            mark = "!" if content.get("excited") is True else "."
            self.chunk(session_id, f"Hello, {content['name']}{mark} ")
        else:
            self.chunk(session_id, f"(No name: {result.get('action', 'no answer')}.) ")

    async def visit(self, session_id: str) -> None:
        """A URL to open; on accept, elicitation/complete at once (the demo's page is
        imaginary: nothing is there to wait for)."""
        if self.elicitation.get("url") is None:
            self.chunk(session_id, "(Your client cannot open addresses.) ")
            return
        elicitation_id = f"demo-visit-{uuid.uuid4().hex[:8]}"
        answer = await self.call_client(
            acp.ELICITATION_CREATE,
            {
                "sessionId": session_id,
                "mode": "url",
                "message": "Open the demo's page to go on.",
                "elicitationId": elicitation_id,
                "url": "https://example.com/acpctl-demo",
            },
        )
        result = _object(answer.get("result"))
        if result.get("action") == "accept":
            self.out.send(
                jsonrpc.notification(acp.ELICITATION_COMPLETE, {"elicitationId": elicitation_id})
            )
            self.chunk(session_id, "Thanks for visiting. ")
        else:
            self.chunk(session_id, f"(Not visited: {result.get('action', 'no answer')}.) ")

    # -- dispatch ---------------------------------------------------------------------

    async def handle(self, message: Any) -> None:
        if not isinstance(message, dict):
            self.out.send(jsonrpc.error(None, acp.INVALID_REQUEST, "invalid request"))
            return
        method = message.get("method")
        if method is None:  # an answer to nothing we asked
            return
        handlers = {
            acp.INITIALIZE: self.initialize,
            acp.SESSION_NEW: self.new_session,
            acp.SESSION_RESUME: self.resume_session,
            acp.SESSION_CLOSE: self.close_session,
            acp.SESSION_SET_MODE: self.set_mode,
            acp.SESSION_SET_CONFIG_OPTION: self.set_config_option,
            acp.SESSION_PROMPT: self.prompt,
            acp.SESSION_CANCEL: self.cancel,
            "_demo/ping": self.ping,
        }
        handler = handlers.get(method)
        if "id" not in message:
            if handler is not None:
                await handler(message.get("params") or {})
            return
        msg_id = message["id"]
        if handler is None:
            self.out.send(
                jsonrpc.error(msg_id, acp.METHOD_NOT_FOUND, f"method not found: {method}")
            )
            return
        params = message.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise RpcError(acp.INVALID_PARAMS, f"{method} takes an object as params")
            self.out.send(jsonrpc.result(msg_id, await handler(params)))
        except RpcError as exc:
            self.out.send(jsonrpc.error_response(msg_id, exc))
        except Exception as exc:  # a bug answers with an error, never with silence
            self.out.send(jsonrpc.error(msg_id, acp.INTERNAL_ERROR, f"internal error: {exc}"))
        await self.out.drain()

    async def ping(self, params: JsonObject) -> JsonObject:
        return {}


def _object(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _prompt_text(blocks: Any) -> str:
    return " ".join(
        block.get("text", "")
        if block.get("type") == "text"
        else block.get("resource", {}).get("text", "")
        if block.get("type") == "resource"
        else block.get("uri", "")
        if block.get("type") == "resource_link"
        else ""
        for block in blocks
        if isinstance(block, dict)
    ).strip()


async def serve() -> None:
    output = await Output.open(sys.stdout.fileno())
    reader = await open_input(sys.stdin.fileno())
    agent = DemoAgent(output)
    tasks: set[asyncio.Task[None]] = set()

    def handle(message: Any, line: bytes) -> None:
        task = asyncio.create_task(agent.handle(message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def refuse(line: jsonrpc.BadLine) -> None:
        output.send(jsonrpc.error_response(None, line.error))

    await agent.peer.read(jsonrpc.read_messages(reader), handle, refuse, output.drain)
    for session in agent.sessions.values():
        session.cancelled.set()


def main() -> None:
    print(f"acpctl demo agent {__version__} ready", file=sys.stderr, flush=True)
    asyncio.run(serve())


if __name__ == "__main__":
    main()
