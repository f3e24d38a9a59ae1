"""The status line of a turn on a terminal: what the agent is doing, the time so far, and
facts that other parts add (the link's outage, the context window's fill).

It never shares a line with the answer. While the answer's cursor is at the start of a line,
the line is drawn there; while it is inside a line, the line is drawn on the row below, the
cursor kept where the answer goes on (save, move down, draw, restore); either way it is
erased, leaving the screen as it was, before anything else is written. On a line that is
full to the last column (the terminal about to wrap) or on a terminal that cannot move the
cursor (TERM=dumb), nothing is drawn until the answer reaches a line's start.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import time
from typing import Any, TextIO

from acpctl import protocol as acp
from acpctl.terminal.screen import AnswerColumn, cell_width, cells, printable

# VT100 controls every terminal emulator has: index (down a row, scrolling at the bottom),
# reverse index (up a row), save and restore the cursor, erase to the end of the line.
DOWN, UP, SAVE, RESTORE, ERASE = "\033D", "\033M", "\0337", "\0338", "\033[K"


def fitted(text: str, columns: int) -> str:
    """`text` cut to fit in `columns` cells, with an ellipsis where it was cut."""
    used, kept = 0, list[str]()
    for char in text:
        used += cell_width(char)
        if used > columns:
            return "".join(kept[:-1]) + "…" if kept else ""
        kept.append(char)
    return text


def context_fill(update: dict[str, Any]) -> str | None:
    """A usage_update's context window, as the status line says it: "context 41% of 200k"
    (None when it says no `used` of a `size`)."""
    used, size = update.get("used"), update.get("size")
    if not isinstance(used, (int, float)) or not isinstance(size, (int, float)) or size <= 0:
        return None
    shown = f"{size / 1000:g}k" if size >= 1000 else f"{size:g}"
    return f"context {min(used / size, 1.0):.0%} of {shown}"


class StatusLine:
    """Drawn on stderr, when stderr is a terminal, whenever the agent has been quiet for
    QUIET_S; `facts` are shown after the activity, in the order they were set."""

    FRAMES = "|/-\\"
    QUIET_S = 0.25
    TICK_S = 0.1

    def __init__(self, err: TextIO, answer: AnswerColumn) -> None:
        self.err = err
        self.answer = answer
        self.enabled = err.isatty()
        self.moves_cursor = os.environ.get("TERM") != "dumb"
        self.activity = "waiting for the agent"
        self.facts: dict[str, str] = {}
        self.began = self.quiet_since = time.monotonic()
        self.paused = False  # a question is on the terminal
        self._drawn: str | None = None  # "here" (the answer's empty line) or "below"
        self._width = 0  # of what was drawn here, for a terminal that cannot erase
        self._frames = itertools.cycle(self.FRAMES)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.ensure_future(self._tick())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.hide()

    def fact(self, key: str, text: str | None) -> None:
        """Show `text` as the fact `key` from the next draw on (None: no longer)."""
        if text is None:
            self.facts.pop(key, None)
        else:
            self.facts[key] = text

    def saw(self, update: dict[str, Any]) -> None:
        """An update came: the line goes, and says next what the agent is doing."""
        self.hide()
        self.quiet_since = time.monotonic()
        kind = update.get("sessionUpdate")
        if kind == acp.AGENT_THOUGHT_CHUNK:
            self.activity = "thinking"
        elif kind in (acp.TOOL_CALL, acp.TOOL_CALL_UPDATE):
            status = update.get("status")
            title = update.get("title")
            if status in ("completed", "failed"):
                self.activity = "working"
            elif isinstance(title, str) and title:
                self.activity = f"running: {printable(title).splitlines()[0][:60]}"
        elif kind == acp.AGENT_MESSAGE_CHUNK:
            self.activity = "working"
        elif kind == acp.USAGE_UPDATE and (fill := context_fill(update)):
            self.fact("context", fill)  # an update of the cost alone leaves the fill as it was

    def text(self, frame: str) -> str:
        parts = [f"{frame} {self.activity}... {time.monotonic() - self.began:.1f}s"]
        return " · ".join(parts + [printable(fact) for fact in self.facts.values()])

    def draw(self, text: str) -> None:
        columns = self.columns()
        line = fitted(text.replace("\n", " "), max(columns - 1, 1))  # never wraps
        x = self.answer.at(columns)
        if x == 0:
            self.hide_below()
            erase = ERASE if self.moves_cursor else " " * max(self._width - cells(line), 0)
            self.err.write("\r" + line + erase)
            self._drawn, self._width = "here", max(self._width, cells(line))
        elif x < columns and self.moves_cursor:
            # Down then up first: at the screen's last row that scrolls a row in, so that the
            # saved position is still the answer's after the move down.
            self.err.write(DOWN + UP + SAVE + DOWN + "\r" + line + ERASE + RESTORE)
            self._drawn = "below"
        else:
            self.hide()
            return
        self.err.flush()

    def columns(self) -> int:
        try:
            columns = os.get_terminal_size(self.err.fileno()).columns
        except (OSError, ValueError, AttributeError):  # not a real file, a closed one
            columns = 0
        return columns or shutil.get_terminal_size().columns  # 0: a terminal of no size yet

    def hide(self) -> None:
        if self._drawn == "here":
            erase = ERASE if self.moves_cursor else " " * self._width + "\r"
            self.err.write("\r" + erase)
            self._drawn, self._width = None, 0
            self.err.flush()
        else:
            self.hide_below()

    def hide_below(self) -> None:
        if self._drawn == "below":
            self.err.write(SAVE + DOWN + "\r" + ERASE + RESTORE)
            self._drawn = None
            self.err.flush()

    async def _tick(self) -> None:
        for frame in self._frames:
            await asyncio.sleep(self.TICK_S)
            if not self.paused and time.monotonic() - self.quiet_since >= self.QUIET_S:
                self.draw(self.text(frame))
