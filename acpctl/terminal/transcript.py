"""A stored session as a transcript: streamed to a terminal, or as Markdown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TextIO

from acpctl import protocol as acp
from acpctl.store.lines import event_update
from acpctl.store.sessions import TURN_ENDS, SessionMeta, SessionStore
from acpctl.terminal.render import (
    DIM,
    YELLOW,
    Renderer,
    answered_by,
    content_text,
    diff_lines,
)
from acpctl.terminal.screen import printable
from acpctl.terminal.status_line import context_fill


class EventView:
    """Stored events as the terminal shows them, for `sessions show` and `sessions watch`:
    updates as `acpctl run` renders them, the agent's questions (permissions,
    elicitations) and their answers, turn ends."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.renderer = Renderer(out)
        self.fill: str | None = None  # the context window's, as the last usage_update said

    def header(self, meta: SessionMeta) -> None:
        label = meta.name or meta.title or "(untitled)"
        header = printable(f"{label} - {meta.agent} - {meta.cwd}")
        self.out.write(self.renderer.style(header, DIM) + "\n\n")

    def show(self, event: dict[str, Any]) -> None:
        update = event_update(event)
        kind = event.get("type")
        style = self.renderer.style
        if update is not None:
            if update.get("sessionUpdate") == acp.USAGE_UPDATE:
                self.fill = context_fill(update) or self.fill
            self.renderer.update(update)
        elif kind in TURN_ENDS:
            self.renderer.finish(None)
            detail = event.get("stopReason") or f"error: {event.get('message')}"
            fill = f" · {self.fill}" if self.fill else ""
            self.out.write(style(f"[{detail}]{fill}", DIM) + "\n\n")
        elif kind in acp.RECORDED_EVENTS:
            if kind in QUESTIONS:
                self.renderer.finish(None)
            for line in recorded_lines(event):
                self.out.write(style(line, YELLOW) + "\n")
        self.out.flush()


QUESTIONS = ("permission", "elicitation")


def recorded_lines(event: dict[str, Any]) -> list[str]:
    """A recorded question of the agent's (a permission, an elicitation) or its answer,
    as plain lines a terminal may show (the agent's text made printable)."""
    kind = event.get("type")
    if kind == "permission":
        tool = _dict(event.get("toolCall"))
        choices = ", ".join(str(o.get("name")) for o in _dicts(event.get("options")))
        return [printable(f"? permission asked: {tool.get('title') or 'a tool call'} ({choices})")]
    if kind == "elicitation":
        lines = [f"? the agent asks: {event.get('message') or '(no message)'}"]
        if event.get("mode") == "url":
            lines.append(f"  at {event.get('url')}")
        fields = _dict(_dict(event.get("requestedSchema")).get("properties"))
        if fields:
            lines.append("  form: " + ", ".join(map(str, fields)))
        return [printable(line) for line in lines]
    if kind in ("permission_outcome", "elicitation_outcome"):
        return [printable(f"  answered: {answer_of(event)}")]
    return []


def answer_of(event: dict[str, Any]) -> str:
    """A recorded answer (permission_outcome, elicitation_outcome) in words: the option
    chosen, or the action and the form's content; and who gave it (a paired device by
    its name, any other client by its clientInfo's)."""
    if event.get("type") == "permission_outcome":
        outcome = _dict(event.get("outcome"))
        answer = str(outcome.get("optionId") or outcome.get("outcome"))
    else:
        answer = str(event.get("action"))
        content = _dict(event.get("content"))
        if content:
            answer += " (" + ", ".join(f"{k}={v!r}" for k, v in content.items()) + ")"
    return answer + answered_by(event.get("resolvedBy"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def write_terminal(store: SessionStore, meta: SessionMeta, out: TextIO) -> None:
    """Stream the transcript: the first screen shows before the whole log is read."""
    view = EventView(out)
    view.header(meta)
    for event in store.iter_events(meta.id):
        view.show(event)


def markdown(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    yield f"# {meta.title or 'Untitled session'}\n\n"
    yield (
        f"- session: `{meta.id}`\n- agent: {meta.agent}\n- directory: `{meta.cwd}`\n"
        f"- created: {meta.created}\n- updated: {meta.updated}\n- turns: {meta.turns}\n"
    )
    current: str | None = None
    message_id: Any = None
    for event in store.iter_events(meta.id):
        update = event_update(event)
        if update is None:
            if event.get("type") == "turn_end":
                yield f"\n\n*({event.get('stopReason')})*\n"
                current = None
            continue
        kind = update.get("sessionUpdate")
        if kind in (acp.USER_MESSAGE_CHUNK, acp.AGENT_MESSAGE_CHUNK, acp.AGENT_THOUGHT_CHUNK):
            text = content_text(update.get("content"))
            chunk_id = update.get("messageId")
            if kind == current and chunk_id is not None and message_id not in (None, chunk_id):
                yield "\n\n"  # another message of the agent's: a paragraph of its own
            message_id = chunk_id
            if kind != current:
                heading = {
                    acp.USER_MESSAGE_CHUNK: "\n\n## You\n\n",
                    acp.AGENT_MESSAGE_CHUNK: "\n\n## Agent\n\n",
                    acp.AGENT_THOUGHT_CHUNK: "\n\n> *Thinking:* ",
                }[kind]
                yield heading
                current = kind
            elif kind == acp.USER_MESSAGE_CHUNK:
                yield "\n\n"  # each content block of a prompt is a paragraph
            yield text.replace("\n", "\n> ") if kind == acp.AGENT_THOUGHT_CHUNK else text
        elif kind in (acp.TOOL_CALL, acp.TOOL_CALL_UPDATE):
            current = None
            yield from _tool_markdown(update)
        elif kind == acp.PLAN:
            current = None
            yield "\n\n**Plan**\n\n"
            for entry in update.get("entries") or []:
                mark = "x" if entry.get("status") == "completed" else " "
                yield f"- [{mark}] {entry.get('content', '')}\n"
    yield "\n"


def _tool_markdown(update: dict[str, Any]) -> Iterator[str]:
    title = update.get("title") or update.get("toolCallId")
    status = update.get("status")
    yield f"\n\n- **{title}**{f' ({status})' if status else ''}\n"
    for item in update.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "diff":
            yield "\n```diff\n" + "\n".join(diff_lines(item)) + "\n```\n"
