"""A session as one self-contained HTML file (`sessions export --format html`): no scripts,
no external styles, fonts or images; readable with scripting off, and printable.

The conversation shows as an editor shows it: the agent's Markdown rendered (raw HTML in
it escaped, unsafe links dropped, by markdown-it's CommonMark preset without HTML),
thoughts folded, plans, tool calls with their status and coloured diffs, permission
requests and their answers; a header with the agent, directory, dates and usage."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

from acpctl import __version__
from acpctl import protocol as acp
from acpctl.store.lines import event_update
from acpctl.store.sessions import TURN_ENDS, SessionMeta, SessionStore
from acpctl.terminal.render import STATUS_MARK, content_text, diff_lines, money
from acpctl.terminal.transcript import answer_of

STYLE = """
:root { color-scheme: light dark; --fg: #1f2328; --bg: #fff; --muted: #656d76;
  --line: #d0d7de; --you: #eef4ff; --add: #dafbe1; --del: #ffebe9; --tool: #f6f8fa; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117;
  --muted: #8d96a0; --line: #30363d; --you: #121d2f; --add: #12361e; --del: #3d1418;
  --tool: #161b22; } }
body { font: 15px/1.55 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
header { border-bottom: 1px solid var(--line); margin-bottom: 1.5rem; }
header h1 { font-size: 1.4rem; margin: 0 0 .5rem; }
header dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem;
  color: var(--muted); font-size: .9rem; }
header dd { margin: 0; overflow-wrap: anywhere; }
.turn { margin: 1.5rem 0; }
.plain { white-space: pre-wrap; overflow-wrap: anywhere; }
.you { background: var(--you); border-radius: 8px; padding: .6rem .9rem;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.who { font-size: .75rem; text-transform: uppercase; letter-spacing: .05em;
  color: var(--muted); margin: 1rem 0 .3rem; }
.agent pre, .tool pre { overflow-x: auto; }
pre, code { font: 13px/1.45 ui-monospace, monospace; }
.agent pre { background: var(--tool); padding: .6rem; border-radius: 6px; }
details { margin: .4rem 0; }
summary { cursor: pointer; color: var(--muted); }
.thought { color: var(--muted); white-space: pre-wrap; border-left: 3px solid var(--line);
  padding-left: .8rem; }
.tool { background: var(--tool); border: 1px solid var(--line); border-radius: 6px;
  padding: .3rem .7rem; }
.tool summary { color: var(--fg); }
.status { font-size: .75rem; border: 1px solid var(--line); border-radius: 1rem;
  padding: 0 .5rem; margin-left: .4rem; color: var(--muted); }
.diff { margin: .4rem 0; }
.diff span { display: block; white-space: pre; }
.add { background: var(--add); } .del { background: var(--del); }
.plan { list-style: none; padding-left: .5rem; }
.ask { color: #9a6700; font-size: .9rem; margin: .4rem 0; }
.end { color: var(--muted); font-size: .8rem; }
footer { color: var(--muted); font-size: .8rem; border-top: 1px solid var(--line);
  margin-top: 2rem; padding-top: .5rem; }
@media print { body { max-width: none; margin: 0; } details > summary { list-style: none; }
  .tool, .you { break-inside: avoid; } }
"""

_DIFF_CLASS = {"+": "add", "-": "del"}
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False})


def _image_as_link(
    renderer: Any, tokens: list[Token], index: int, options: OptionsDict, env: Any
) -> str:
    """An image in the agent's Markdown becomes a link to it: the page fetches nothing,
    even in a viewer that ignores its Content-Security-Policy."""
    token = tokens[index]
    source = str(token.attrGet("src") or "")
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    return f'<a href="{_e(source)}">{_e(alt or source)}</a>'


_MARKDOWN.add_render_rule("image", _image_as_link)


def _markdown(text: str) -> str:
    """The agent's Markdown as HTML; as plain text when it nests deeper than the renderer
    goes (markdown-it drops everything past its nesting limit: an agent could hide the rest
    of a message from the page)."""
    tokens = _MARKDOWN.parse(text)
    if max((token.level for token in tokens), default=0) >= _MARKDOWN.options.maxNesting - 1:
        return f'<div class="plain">{_e(text)}</div>'
    return str(_MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {}))


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


class _Page:
    """Builds the body turn by turn; consecutive chunks of one kind form one block."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kind: str | None = None
        self.buffer: list[str] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, int] = {}
        self.cost: dict[str, float] = {}
        self.open_turn = False

    def flush(self) -> None:
        text = "".join(self.buffer)
        self.buffer = []
        kind, self.kind = self.kind, None
        if not text.strip():
            return
        if kind == acp.USER_MESSAGE_CHUNK:
            self._start_turn()
            self.parts.append(f'<div class="who">You</div><div class="you">{_e(text)}</div>')
        elif kind == acp.AGENT_MESSAGE_CHUNK:
            self.parts.append(
                f'<div class="who">Agent</div><div class="agent">{_markdown(text)}</div>'
            )
        elif kind == acp.AGENT_THOUGHT_CHUNK:
            self.parts.append(
                f'<details><summary>Thinking</summary><div class="thought">{_e(text)}</div>'
                "</details>"
            )

    def _start_turn(self) -> None:
        if not self.open_turn:
            self.parts.append('<section class="turn">')
            self.open_turn = True

    def end_turn(self, event: dict[str, Any]) -> None:
        self.flush()
        self._start_turn()
        detail = event.get("stopReason") or f"error: {event.get('message')}"
        self.parts.append(f'<div class="end">turn ended: {_e(detail)}</div></section>')
        self.open_turn = False
        usage = event.get("usage")
        if isinstance(usage, dict):
            for name, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.tokens[name] = self.tokens.get(name, 0) + value

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in (acp.USER_MESSAGE_CHUNK, acp.AGENT_MESSAGE_CHUNK, acp.AGENT_THOUGHT_CHUNK):
            if kind != self.kind:
                self.flush()
                self.kind = kind
            elif kind == acp.USER_MESSAGE_CHUNK:
                self.buffer.append("\n\n")  # each block of a prompt a paragraph
            self.buffer.append(content_text(update.get("content")))
        elif kind in (acp.TOOL_CALL, acp.TOOL_CALL_UPDATE):
            self.flush()
            tool_id = str(update.get("toolCallId", ""))
            known = self.tools.setdefault(tool_id, {"index": len(self.parts)})
            known.update({k: v for k, v in update.items() if v is not None})
            if known["index"] == len(self.parts):
                self.parts.append("")
            self.parts[known["index"]] = _tool(known)
        elif kind == acp.PLAN:
            self.flush()
            items = "".join(
                f"<li>{STATUS_MARK.get(str(e.get('status')), '○')} {_e(e.get('content', ''))}</li>"
                for e in update.get("entries") or []
                if isinstance(e, dict)
            )
            self.parts.append(f'<div class="who">Plan</div><ul class="plan">{items}</ul>')
        elif kind == acp.NOTICE:
            self.flush()
            detail = update.get("description")
            self.parts.append(
                f'<div class="ask">{_e(update.get("severity") or "info")}: '
                f"{_e(update.get('title') or '')}"
                + (f" — {_e(detail)}" if isinstance(detail, str) else "")
                + "</div>"
            )
        elif kind == acp.COMPACTION_UPDATE:
            self.flush()
            self.parts.append(
                f'<div class="end">— context compaction: {_e(update.get("status"))} —</div>'
            )
        elif kind == acp.USAGE_UPDATE:
            cost = update.get("cost")
            if isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)):
                self.cost = {str(cost.get("currency")): float(cost["amount"])}

    def permission(self, event: dict[str, Any]) -> None:
        self.flush()
        tool = event.get("toolCall") or {}
        choices = ", ".join(str(o.get("name")) for o in event.get("options") or [])
        self.parts.append(
            f'<div class="ask">Permission asked: {_e(tool.get("title") or "a tool call")} '
            f"({_e(choices)})</div>"
        )

    def elicitation(self, event: dict[str, Any]) -> None:
        """The agent's question: its message, and the form's fields or the URL (as text,
        never a link: the agent chose it)."""
        self.flush()
        detail = ""
        if event.get("mode") == "url":
            detail = f" at {_e(event.get('url'))}"
        schema = event.get("requestedSchema")
        fields = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(fields, dict) and fields:
            detail += f" (form: {_e(', '.join(map(str, fields)))})"
        self.parts.append(
            f'<div class="ask">The agent asks: {_e(event.get("message") or "")}{detail}</div>'
        )

    def outcome(self, event: dict[str, Any]) -> None:
        """How a permission or a question was answered, and by whom."""
        self.parts.append(f'<div class="ask">Answered: {_e(answer_of(event))}</div>')


def _tool(tool: dict[str, Any]) -> str:
    status = str(tool.get("status") or "pending")
    title = tool.get("title") or tool.get("kind") or "tool call"
    body = []
    for item in tool.get("content") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "diff":
            lines = []
            for line in diff_lines(item):
                cls = "" if line.startswith(("+++", "---")) else _DIFF_CLASS.get(line[:1], "")
                lines.append(f'<span class="{cls}">{_e(line)}</span>')
            body.append(f'<pre class="diff">{"".join(lines)}</pre>')
        elif item.get("type") == "content":
            text = content_text(item.get("content"))
            if text:
                body.append(f"<pre>{_e(text)}</pre>")
    mark = STATUS_MARK.get(status, "○")
    return (
        f'<details class="tool" open><summary>{mark} {_e(title)}'
        f'<span class="status">{_e(status)}</span></summary>{"".join(body)}</details>'
    )


def export_html(store: SessionStore, meta: SessionMeta) -> Iterator[str]:
    page = _Page()
    for event in store.iter_events(meta.id):
        kind = event.get("type")
        update = event_update(event)
        if update is not None:
            page.update(update)
        elif kind in TURN_ENDS:
            page.end_turn(event)
        elif kind == "permission":
            page.permission(event)
        elif kind == "elicitation":
            page.elicitation(event)
        elif kind in ("permission_outcome", "elicitation_outcome"):
            page.outcome(event)
        elif kind == "fork":
            page.flush()
            page.parts.append(
                f'<div class="end">— forked from {_e(event.get("parentId"))} here —</div>'
            )
    page.flush()
    if page.open_turn:
        page.parts.append("</section>")
    title = meta.name or meta.title or "Untitled session"
    facts = [
        ("agent", meta.agent),
        ("directory", meta.cwd),
        ("session", meta.id),
        ("created", meta.created),
        ("updated", meta.updated),
        ("turns", meta.turns),
    ]
    if meta.parent_id:
        facts.append(("forked from", meta.parent_id))
    if page.tokens:
        facts.append(
            (
                "tokens",
                ", ".join(f"{n.removesuffix('Tokens')} {v:,}" for n, v in page.tokens.items()),
            )
        )
    if page.cost:
        facts.append(("cost", money(page.cost, digits=4)))  # one session's: small sums
    rows = "".join(f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>" for name, value in facts)
    yield (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">\n"
        f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<header><h1>{_e(title)}</h1><dl>{rows}</dl></header>\n<main>\n"
    )
    yield from (part + "\n" for part in page.parts if part)
    yield f"</main>\n<footer>exported by acpctl {_e(__version__)}</footer>\n</body>\n</html>\n"
