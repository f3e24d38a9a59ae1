"""A stored session as a transcript: streamed to a terminal, or as Markdown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TextIO

from acpctl import protocol as acp
from acpctl.store.sessions import SessionMeta, SessionStore, event_update
from acpctl.terminal.render import DIM, Renderer, content_text, diff_lines


def write_terminal(store: SessionStore, meta: SessionMeta, out: TextIO) -> None:
    """Stream the transcript: the first screen shows before the whole log is read."""
    renderer = Renderer(out)
    out.write(
        renderer.style(f"{meta.title or '(untitled)'} - {meta.agent} - {meta.cwd}", DIM) + "\n\n"
    )
    for event in store.iter_events(meta.id):
        update = event_update(event)
        if update is not None:
            renderer.update(update)
        elif event.get("type") in ("turn_end", "turn_error"):
            renderer.finish(None)
            detail = event.get("stopReason") or f"error: {event.get('message')}"
            out.write(renderer.style(f"[{detail}]", DIM) + "\n\n")


def markdown(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    yield f"# {meta.title or 'Untitled session'}\n\n"
    yield (
        f"- session: `{meta.id}`\n- agent: {meta.agent}\n- directory: `{meta.cwd}`\n"
        f"- created: {meta.created}\n- updated: {meta.updated}\n- turns: {meta.turns}\n"
    )
    current: str | None = None
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
