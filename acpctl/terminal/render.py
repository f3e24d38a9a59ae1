"""Showing ACP session updates in a terminal: text (streamed), json (NDJSON) or quiet."""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from acpctl import protocol as acp
from acpctl.terminal.screen import AnswerColumn, printable
from acpctl.terminal.status_line import StatusLine

if TYPE_CHECKING:
    from rich.console import Console

DIM, BOLD, GREEN, RED, YELLOW, RESET = (
    "\033[2m",
    "\033[1m",
    "\033[32m",
    "\033[31m",
    "\033[33m",
    "\033[0m",
)
STATUS_MARK = {"pending": "○", "in_progress": "◐", "completed": "●", "failed": "✗"}


def content_text(content: Any) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text", ""))
        if content.get("type") == "resource_link":
            return f"[{content.get('name') or content.get('uri')}]"
    return ""


def diff_lines(item: dict[str, Any]) -> list[str]:
    old = str(item.get("oldText") or "").splitlines()
    new = str(item.get("newText") or "").splitlines()
    path = str(item.get("path", ""))
    return list(difflib.unified_diff(old, new, fromfile=path, tofile=path, lineterm=""))


def money(cost: dict[str, float], digits: int = 2) -> str:
    """Amounts by currency, for people: $1.25, or 1.25 EUR; an amount under a cent with two
    significant digits ($0.00098), never rounded away to $0.00."""

    def amount(value: float) -> str:
        places = digits
        if 0 < abs(value) < 10**-digits:
            places = 1 - math.floor(math.log10(abs(value)))
        return f"{value:,.{places}f}"

    return ", ".join(
        f"${amount(value)}" if currency == "USD" else f"{amount(value)} {currency}"
        for currency, value in sorted(cost.items())
    )


def wants_colour(out: TextIO) -> bool:
    """The conventions every output follows: NO_COLOR set (and not empty) turns colour
    off, else FORCE_COLOR set turns it on, else colour when the output is a terminal.
    (rich, which draws the tables and doctor's report, reads the same two variables.)"""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return out.isatty()


def rich_console(stderr: bool = False) -> Console:
    """A rich console for tables, reports and status lines. rich reads NO_COLOR as "no
    colours" but still prints bold and dim; with NO_COLOR, acpctl prints no escape codes at
    all, as its own renderer does."""
    from rich.console import Console

    if os.environ.get("NO_COLOR"):
        return Console(stderr=stderr, color_system=None, highlight=False)
    return Console(stderr=stderr, highlight=False)


@contextlib.contextmanager
def status(message: str) -> Iterator[None]:
    """A status line on stderr while slow work runs (an agent starting, doctor's probes,
    an install), when stderr is a terminal; nothing when it is piped."""
    if not sys.stderr.isatty():
        yield
        return
    if os.environ.get("NO_COLOR"):  # rich's spinner moves the cursor with escape codes
        sys.stderr.write(message)
        sys.stderr.flush()
        try:
            yield
        finally:
            sys.stderr.write("\r" + " " * len(message) + "\r")
            sys.stderr.flush()
        return
    with rich_console(stderr=True).status(message):
        yield


def answered_by(resolved_by: Any) -> str:
    """ ", by WHO" of an answer's resolvedBy: a paired device by its name, any other
    client by its clientInfo's ("" when it says none); and ", from a notification" when
    it answered from a push's notification, ", through HOST" from a linked host's page."""
    who = resolved_by if isinstance(resolved_by, dict) else {}
    by = f"{who['device']} (a paired device)" if who.get("device") else who.get("name")
    how = ", from a notification" if by and who.get("via") == "notification" else ""
    if by and who.get("through"):
        how += f", through {who['through']}"
    return f", by {printable(str(by) + how)}" if by else ""


Lines = Iterator[tuple[str, str | None]]  # (text, style)


def _plan(update: dict[str, Any]) -> Lines:
    yield "Plan:", BOLD
    for entry in update.get("entries") or []:
        mark = STATUS_MARK.get(str(entry.get("status")), "○")
        yield f"  {mark} {printable(str(entry.get('content', '')))}", None


def _notice(update: dict[str, Any]) -> Lines:
    severity = printable(str(update.get("severity") or "info"))
    detail = update.get("description")
    line = f"[{severity}] {printable(str(update.get('title') or ''))}"
    yield line + (f": {printable(detail)}" if isinstance(detail, str) else ""), YELLOW


def _compaction(update: dict[str, Any]) -> Lines:
    yield f"(context compaction: {printable(str(update.get('status')))})", DIM


# The kinds shown as whole lines, and what makes them.
LINES: dict[str, Callable[[dict[str, Any]], Lines]] = {
    acp.PLAN: _plan,
    acp.NOTICE: _notice,
    acp.COMPACTION_UPDATE: _compaction,
}


class Renderer:
    """Text for people: streamed message text, dimmed thoughts, tool calls with status
    and diffs, plans, notices, a context compaction's progress (not its summary: the
    agent's own record of what it kept). Other kinds, and kinds it does not know, are not
    shown (`--format json` shows every update). Colour by `wants_colour`. Agent text is
    shown with its control characters made visible (`printable`). A turn's status line is
    erased before anything is written, and is told where the answer's cursor is
    (`column`)."""

    shows_status = True  # a turn's status line on a terminal (the other formats: none)

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.status: StatusLine | None = None  # the running turn's, in a terminal
        self.column = AnswerColumn(on_screen=out.isatty())
        self.session_id: str | None = None  # the session shown, once it is known
        self.colour = wants_colour(out)
        self.last_kind: str | None = None
        self.message_id: Any = None  # the messageId of the chunks shown last
        self.text: list[str] = []
        self.tools: dict[str, str] = {}

    def style(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.colour else text

    def write(self, text: str, style: str | None = None) -> None:
        """Everything the renderer shows passes here: the status line goes first, and the
        column is known."""
        if self.status is not None:
            self.status.hide()
        self.out.write(self.style(text, style) if style else text)
        self.column.wrote(text)

    def notice(self, text: str) -> None:
        """A line on stderr during a turn: the status line erased first, and the answer's
        line ended on the screen, so that the notice never lands inside it."""
        if self.status is not None:
            self.status.hide()
        if self.column.line:
            self.out.write("\n")
            self.out.flush()
        self.column.line_broken()
        print(text, file=sys.stderr)

    def new_turn(self) -> None:
        """A turn starts: its status line on a terminal's stderr, unless this format or
        stderr shows none."""
        self.status = StatusLine(sys.stderr, self.column) if self.shows_status else None
        if self.status is not None:
            self.status.start()

    def end_turn(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def _break(self, kind: str, message_id: Any = None) -> None:
        """A line break before another kind of update, or another message of the same
        kind (two answers with their own messageIds do not run together)."""
        other_message = message_id is not None and self.message_id not in (None, message_id)
        if self.last_kind is not None and (self.last_kind != kind or other_message):
            self.write("\n")
        self.last_kind = kind
        self.message_id = message_id

    def update(self, update: dict[str, Any]) -> None:
        if self.status is not None:
            self.status.saw(update)
        kind = update.get("sessionUpdate")
        if kind == acp.AGENT_MESSAGE_CHUNK:
            self._break(kind, update.get("messageId"))
            text = content_text(update.get("content"))
            self.text.append(text)
            self.write(printable(text))
        elif kind == acp.AGENT_THOUGHT_CHUNK:
            starts = self.last_kind != kind
            self._break(kind, update.get("messageId"))
            if starts and not self.colour:  # without dimming, say it is a thought
                self.write("(thinking) ")
            self.write(printable(content_text(update.get("content"))), DIM)
        elif kind in (acp.TOOL_CALL, acp.TOOL_CALL_UPDATE):
            self._tool(update)
        elif kind in LINES:
            self._break(str(kind))
            for line, style in LINES[kind](update):
                self.write(line, style)
                self.write("\n")
            self.last_kind = None
        elif kind == acp.PERMISSION_RESOLVED:  # another client answered, in a shared session
            chosen = update.get("chosenOptionId") or "cancelled"
            by = answered_by(update.get("resolvedBy"))
            self.notice(printable(f"  permission answered: {chosen}{by}"))
        elif kind == acp.USER_MESSAGE_CHUNK:
            if self.last_kind == kind:
                self.write("\n")  # one line per content block of the prompt
            self._break(kind)
            self.write("> " + printable(content_text(update.get("content"))), BOLD)
        self.out.flush()

    def _tool(self, update: dict[str, Any]) -> None:
        tool_id = str(update.get("toolCallId", ""))
        title = printable(str(update.get("title") or self.tools.get(tool_id, "tool")))
        self.tools[tool_id] = title
        status = str(update.get("status") or "pending")
        colour = {"completed": GREEN, "failed": RED}.get(status, YELLOW)
        self._break("tool")
        self.write(f"{STATUS_MARK.get(status, '○')} {title} [{printable(status)}]", colour)
        self.write("\n")
        for item in update.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "diff":
                for line in diff_lines(item):
                    style = GREEN if line.startswith("+") else RED if line.startswith("-") else DIM
                    self.write("    ")
                    self.write(printable(line), style)
                    self.write("\n")
            elif isinstance(item, dict) and item.get("type") == "content":
                text = printable(content_text(item.get("content")))
                if text:
                    self.write("    " + text.replace("\n", "\n    ") + "\n")
        self.last_kind = None

    def finish(self, stop_reason: str | None) -> None:
        if self.last_kind is not None:
            self.write("\n")
        self.last_kind = None
        if stop_reason and stop_reason != acp.END_TURN:
            print(self.style(f"[{stop_reason}]", DIM), file=sys.stderr)
        self.out.flush()


class JsonRenderer(Renderer):
    """NDJSON: one ACP update a line, then {"sessionId": ..., "stopReason": ...}."""

    shows_status = False

    def update(self, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == acp.AGENT_MESSAGE_CHUNK:
            self.text.append(content_text(update.get("content")))
        self.out.write(json.dumps(update, ensure_ascii=False) + "\n")
        self.out.flush()

    def finish(self, stop_reason: str | None) -> None:
        end = {"sessionId": self.session_id, "stopReason": stop_reason}
        self.out.write(json.dumps(end) + "\n")
        self.out.flush()


class QuietRenderer(Renderer):
    """Only the final text of the agent's answer."""

    shows_status = False

    def update(self, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == acp.AGENT_MESSAGE_CHUNK:
            self.text.append(content_text(update.get("content")))

    def finish(self, stop_reason: str | None) -> None:
        text = "".join(self.text)
        self.out.write(text + ("" if text.endswith("\n") else "\n"))
        self.out.flush()


RENDERERS = {"text": Renderer, "json": JsonRenderer, "quiet": QuietRenderer}
