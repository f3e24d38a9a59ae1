"""The terminal an answer is shown on: agent text made safe to print there, and the column
the answer's next character goes to, so that a status line can be drawn without covering
any of it (`status_line.py`)."""

from __future__ import annotations

import unicodedata

TAB_STOP = 8

# Every control character but the line break and the tab, as `cat -v` shows it: an escape
# sequence from an agent could move the cursor, retitle the window or hide text, and a
# carriage return would let it write over its own answer.
_VISIBLE = {code: f"^{chr(code + 64)}" for code in range(32) if code not in (9, 10)}
_VISIBLE[13] = "\n"  # a lone carriage return still means "a new line" to whoever wrote it
_VISIBLE[0x7F] = "^?"
_VISIBLE.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})


def printable(text: str) -> str:
    """Agent text as a terminal may show it: its characters, its line breaks and tabs, and
    every other control character in plain sight."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


# Characters that turn or hide text (bidi overrides and isolates, zero-width marks): in what
# a person approves, shown as ⟨U+202E⟩, so the text approved is the text that runs.
_UNSEEN = {
    code: f"⟨U+{code:04X}⟩"
    for code in (0x061C, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x206A))
} | {0xFEFF: "⟨U+FEFF⟩"}


def one_line(text: str) -> str:
    """Agent text printable, on one line: its line breaks and tabs as spaces (a table's
    cell, a search's snippet)."""
    return printable(text).replace("\n", " ").replace("\t", " ")


def approvable(text: str) -> str:
    """Text a person approves (a command, a path, a title) as it will act: printable, and
    every character that turns or hides text in plain sight."""
    return printable(text).translate(_UNSEEN)


def cell_width(char: str) -> int:
    """How many columns a terminal gives the character: 0 for combining marks and format
    characters (they join the one before), 2 for wide East Asian characters and emoji."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cells(text: str) -> int:
    return sum(map(cell_width, text))


def advance(x: int, text: str, width: int) -> int:
    """The cursor's column after `text` (printable, no line break) is written from column
    `x` of a terminal `width` columns wide. `width` means the line is full and the terminal
    holds the cursor there until the next character wraps it; a wide character that does
    not fit in the last column wraps early, as xterm's do."""
    for char in text:
        if char == "\t":
            x = x if x >= width else min((x // TAB_STOP + 1) * TAB_STOP, width - 1)
            continue
        cells = cell_width(char)
        if cells:
            x = cells if x + cells > width else x + cells
    return x


class AnswerColumn:
    """Where the answer's cursor is on the terminal. Told every character the answer writes
    (never the escape codes of its colours); off a terminal it is always at a line's start,
    since nothing of the answer is on the screen."""

    def __init__(self, on_screen: bool) -> None:
        self.on_screen = on_screen
        self.line = ""  # what the answer wrote since its last line break
        self._width = 0  # the terminal width that _x was counted for
        self._x = 0

    def wrote(self, text: str) -> None:
        if not self.on_screen:
            return
        _, newline, after = text.rpartition("\n")
        if newline:
            self.line, self._width, self._x = after, 0, 0
        else:
            self.line += text
            if self._width:
                self._x = advance(self._x, text, self._width)

    def at(self, width: int) -> int:
        """The column on a terminal `width` wide (counted again when the width changed)."""
        if not self.on_screen:
            return 0
        if width != self._width:
            self._width, self._x = width, advance(0, self.line, width)
        return self._x

    def line_broken(self) -> None:
        """Something else ended the line on the screen (a notice, an answered question)."""
        self.line, self._width, self._x = "", 0, 0
