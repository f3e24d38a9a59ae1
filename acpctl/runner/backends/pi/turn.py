"""One prompt turn with pi: pi's events, each by its handler in a table, become ACP updates;
the turn ends when pi says it is neither streaming nor compacting."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Protocol

from acpctl import protocol as acp
from acpctl.agents import signatures
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.backends.pi import translate as pt
from acpctl.runner.backends.pi.child import EXITED, PiChild


class TurnOwner(Protocol):
    """What a turn needs of its session (`PiSession`)."""

    announced: dict[str, tuple[str, JsonObject]]
    before: dict[str, JsonObject]

    def emit(self, update: JsonObject) -> None: ...
    def announce(self, tool_id: str, name: str, args: JsonObject, status: str) -> None: ...
    def tool_started(self, tool_id: str, name: str, args: JsonObject) -> None: ...
    def dialog(self, child: PiChild, request: JsonObject) -> None: ...


class Turn:
    def __init__(self, session: TurnOwner, child: PiChild) -> None:
        self.session = session
        self.child = child
        self.stream = pt.StreamText()
        self.last_assistant: Any = None
        self.usage: dict[str, int] = {}  # summed over the turn's assistant messages
        self.handlers: dict[str, Callable[[JsonObject], None]] = {
            "message_start": self._message_start,
            "message_update": self._message_update,
            "message_end": self._message_end,
            "tool_execution_start": self._tool_start,
            "tool_execution_update": self._tool_progress,
            "tool_execution_end": self._tool_end,
            "extension_ui_request": self._dialog,
            "auto_retry_start": self._note,
            "compaction_start": self._note,
            "plan_mode_complete": self._plan,
        }

    def emit(self, update: JsonObject) -> None:
        self.session.emit(update)

    async def run(self, text: str, images: list[JsonObject]) -> None:
        """Send the prompt and follow its events until the turn is over."""
        events = self.child.subscribe()  # before sending: no event can be missed
        fields: JsonObject = {"message": text}
        if images:
            fields["images"] = images
        await self.child.command("prompt", **fields)
        backlog: collections.deque[Any] = collections.deque()
        while True:
            event = backlog.popleft() if backlog else await events.get()
            if event is EXITED:
                said, data = signatures.explained(
                    f"pi exited with status {self.child.exit_code} during the prompt",
                    self.child.stderr_tail(),
                )
                raise RpcError(
                    acp.INTERNAL_ERROR, said, {"exitStatus": self.child.exit_code, **data}
                )
            kind = event.get("type")
            if kind == "agent_end":
                idle = await self._idle()
                # What pi wrote before that answer: a run it starts again (a compaction and
                # its retry can both be over by the time pi answers) keeps the turn going.
                while not events.empty():
                    backlog.append(events.get_nowait())
                if idle and not any(_restarts(later) for later in backlog):
                    break
            handler = self.handlers.get(kind)
            if handler is not None:
                handler(event)

    async def _idle(self) -> bool:
        """Retries and compaction can end a run and start another: the turn is over when
        pi says it is neither streaming nor compacting, and has started nothing since."""
        try:
            state = await self.child.command("get_state")
        except RpcError:
            return True
        return not (
            isinstance(state, dict) and (state.get("isStreaming") or state.get("isCompacting"))
        )

    # -- the handlers -------------------------------------------------------------------

    def _message_start(self, event: JsonObject) -> None:
        if _role(event) == "assistant":
            self.stream = pt.StreamText()

    def _message_update(self, event: JsonObject) -> None:
        delta = event.get("assistantMessageEvent") or {}
        kind = delta.get("type")
        index = int(delta.get("contentIndex") or 0)
        partial = delta.get("partial") or event.get("message")
        if kind in ("text_delta", "thinking_delta"):
            block = "text" if kind == "text_delta" else "thinking"
            missing = self.stream.delta(
                index, str(delta.get("delta", "")), pt.block_text(partial, index, block)
            )
            if missing:
                self.emit(pt.chunk(_CHUNK_KINDS[block], missing))
        elif kind == "toolcall_end":
            call = delta.get("toolCall") or {}
            self.session.announce(
                str(call.get("id")), str(call.get("name")), call.get("arguments") or {}, "pending"
            )

    def _message_end(self, event: JsonObject) -> None:
        """Send what the final message holds and the events never did."""
        if _role(event) != "assistant":
            return
        message = event.get("message")
        self.last_assistant = message
        pt.add_usage(self.usage, message)
        content = message.get("content") if isinstance(message, dict) else None
        for index, block in enumerate(content or []):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in _CHUNK_KINDS:
                missing = self.stream.missing(index, str(block.get(kind, "")))
                if missing:
                    self.emit(pt.chunk(_CHUNK_KINDS[kind], missing))
            elif kind == "toolCall" and str(block.get("id")) not in self.session.announced:
                self.session.announce(
                    str(block.get("id")),
                    str(block.get("name")),
                    block.get("arguments") or {},
                    "pending",
                )

    def _tool_start(self, event: JsonObject) -> None:
        self.session.tool_started(
            str(event.get("toolCallId")), str(event.get("toolName")), event.get("args") or {}
        )

    def _tool_progress(self, event: JsonObject) -> None:
        self.emit(pt.tool_progress(str(event.get("toolCallId")), event.get("partialResult")))

    def _tool_end(self, event: JsonObject) -> None:
        tool_id = str(event.get("toolCallId"))
        self.emit(
            pt.tool_end(
                tool_id, str(event.get("toolName")), event, self.session.before.pop(tool_id, None)
            )
        )

    def _dialog(self, event: JsonObject) -> None:
        self.session.dialog(self.child, event)

    def _note(self, event: JsonObject) -> None:
        kind = str(event.get("type"))
        note = event.get("errorMessage") or event.get("reason") or ""
        self.emit(pt.chunk(acp.AGENT_THOUGHT_CHUNK, f"({kind.replace('_', ' ')}: {note})\n"))

    def _plan(self, event: JsonObject) -> None:
        planned = pt.plan(event)
        if planned:
            self.emit(planned)


_CHUNK_KINDS = {"text": acp.AGENT_MESSAGE_CHUNK, "thinking": acp.AGENT_THOUGHT_CHUNK}


def _role(event: JsonObject) -> Any:
    message = event.get("message")
    return message.get("role") if isinstance(message, dict) else None


# pi's events that begin another run of the same turn (pi's agent-session.js: a retry
# after a retryable error, a compaction after a context overflow, then the run again).
_RESTARTING = frozenset({"agent_start", "auto_retry_start", "compaction_start"})


def _restarts(event: Any) -> bool:
    return isinstance(event, dict) and event.get("type") in _RESTARTING
