"""Issue 45, 1: the status line never eats the answer. The renderer and the status line
write to one terminal, which pyte (a VT100 emulator) shows: every streamed character is on
the final screen, whatever pauses (status lines drawn) fall before, inside or after a line,
with wide and combining characters, at the screen's bottom, and on a full line."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import shlex
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wcwidth import wcwidth

from acpctl import protocol as acp
from acpctl.terminal.render import Renderer
from acpctl.terminal.screen import AnswerColumn, advance, printable
from acpctl.terminal.status_line import StatusLine
from tests.conftest import TEST_AGENTS, acpctl_argv, cli, write_executable

PAUSE = None  # in a script of chunks: the agent is quiet, and the status line is drawn


class XtermScreen(pyte.HistoryScreen):
    """pyte, with xterm's rule for a wide character that meets the last column: it wraps
    before it, as xterm, VTE, kitty and tmux do (pyte alone cuts it in two)."""

    def draw(self, data: str) -> None:
        for char in data:
            if wcwidth(char) == 2 and self.cursor.x == self.columns - 1:
                self.carriage_return()
                self.linefeed()
            super().draw(char)


class Terminal(io.StringIO):
    """What a program writes to its terminal: stdout and stderr as one stream."""

    def isatty(self) -> bool:
        return True


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": acp.AGENT_MESSAGE_CHUNK, "content": {"type": "text", "text": text}}


class Shown:
    """A turn's answer and status line on a pyte screen of `columns` × `rows`."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        columns: int = 40,
        rows: int = 12,
        term: str = "xterm-256color",
    ) -> None:
        monkeypatch.setenv("TERM", term)
        monkeypatch.setenv("NO_COLOR", "1")
        monkeypatch.setattr(StatusLine, "columns", lambda self: columns)
        self.out = Terminal()
        self.renderer = Renderer(self.out)
        self.status = StatusLine(self.out, self.renderer.column)
        self.renderer.status = self.status
        self.screen = XtermScreen(columns, rows, history=1000)
        self.stream = pyte.Stream(self.screen)
        self.fed = 0

    def play(self, script: list[str | None]) -> None:
        for item in script:
            if item is PAUSE:
                self.status.draw(self.status.text("|"))
            else:
                self.renderer.update(chunk(item))

    def finish(self) -> None:
        self.renderer.finish(acp.END_TURN)
        self.status.stop()

    def rows(self) -> list[str]:
        """The screen as it is now, scrolled-off rows first, each without trailing blanks."""
        written = self.out.getvalue()
        # The terminal's line discipline (onlcr) turns each line feed into CR LF.
        self.stream.feed(written[self.fed :].replace("\n", "\r\n"))
        self.fed = len(written)
        columns = self.screen.columns
        old = [
            "".join(line[x].data for x in range(columns)).rstrip()
            for line in self.screen.history.top
        ]
        return old + [row.rstrip() for row in self.screen.display]

    def cursor(self) -> tuple[int, int]:
        self.rows()
        return self.screen.cursor.y, self.screen.cursor.x


def visible(text: str) -> str:
    """The characters, without the blanks (where a line wraps, a blank may end a row), a
    letter and its combining accent as one (as pyte keeps them)."""
    return unicodedata.normalize("NFC", "".join(text.split()))


def test_a_pause_inside_a_line_keeps_the_line_and_shows_the_status_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first-hour report: the screen showed `them.` of a sentence streamed with pauses."""
    shown = Shown(monkeypatch)
    shown.play(["Hello from the slow", PAUSE])
    rows = shown.rows()
    assert rows[0] == "Hello from the slow"
    assert rows[1].startswith("| waiting for the agent... ") or rows[1].startswith("| working")
    assert shown.cursor() == (0, len("Hello from the slow"))  # the answer goes on there
    shown.play([" mock model, streaming", PAUSE, " in pieces with pauses", PAUSE, " between them."])
    shown.finish()
    expected = "Hello from the slow mock model, streaming in pieces with pauses between them."
    rows = shown.rows()
    assert rows[:2] == [expected[:40].rstrip(), expected[40:]]
    assert all(row == "" for row in rows[2:])


def test_count_with_a_pause_after_every_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other report: `count 8`, half a second apart, left an empty line."""
    shown = Shown(monkeypatch)
    shown.play([item for n in range(1, 9) for item in (f"{n} ", PAUSE)])
    shown.finish()
    assert shown.rows()[0] == "1 2 3 4 5 6 7 8"
    assert all(row == "" for row in shown.rows()[1:])


def test_pauses_before_and_after_lines_draw_the_status_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = Shown(monkeypatch)
    shown.play([PAUSE])
    assert shown.rows()[0].startswith("| waiting for the agent")
    shown.play(["first line\n", PAUSE])
    rows = shown.rows()
    assert rows[0] == "first line" and rows[1].startswith("| working")  # on the empty line
    shown.play(["second"])
    shown.finish()
    assert shown.rows()[:3] == ["first line", "second", ""]


def test_wide_and_combining_characters_survive_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = Shown(monkeypatch, columns=12)
    shown.play(["漢字かな", PAUSE, "e\u0301t\u00e9", PAUSE, " 😀 done"])
    shown.finish()
    assert visible("".join(shown.rows())) == visible("漢字かなe\u0301t\u00e9 😀 done")


def test_at_the_bottom_of_the_screen_the_status_scrolls_in_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = Shown(monkeypatch, rows=4)
    shown.play(["one\ntwo\nthree\nfour and", PAUSE])
    rows = shown.rows()
    assert rows[-2] == "four and" and rows[-1].startswith("| working")
    shown.play([" more", PAUSE, " still"])
    shown.finish()
    assert [row for row in shown.rows() if row] == ["one", "two", "three", "four and more still"]


def test_a_full_line_gets_no_status_until_the_next_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line that fills the last column leaves the cursor waiting to wrap; moving it would
    lose that on xterm, so nothing is drawn there."""
    shown = Shown(monkeypatch, columns=10)
    shown.play(["0123456789", PAUSE])
    assert shown.rows()[1] == ""
    shown.play(["abc"])
    shown.finish()
    assert shown.rows()[:2] == ["0123456789", "abc"]


def test_a_dumb_terminal_shows_the_status_only_at_a_line_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = Shown(monkeypatch, term="dumb")
    shown.play(["half a line", PAUSE])
    assert shown.rows()[:2] == ["half a line", ""]
    assert "\033" not in shown.out.getvalue()
    shown.play([" and the rest\n", PAUSE])
    assert shown.rows()[1].startswith("| working")
    shown.play(["next"])
    shown.finish()
    assert shown.rows()[:3] == ["half a line and the rest", "next", ""]
    assert "\033" not in shown.out.getvalue()


def test_facts_follow_the_activity_and_are_cut_to_the_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = Shown(monkeypatch, columns=50)
    shown.status.fact("link", "link down since 12:00:01, reconnecting")
    shown.status.fact("context", "context 41%")
    shown.play(["partial", PAUSE])
    status_row = shown.rows()[1]
    assert "· link down since 12:00:01" in status_row and status_row.endswith("…")
    assert len(status_row) == 49  # never the last column: it would wrap
    shown.status.fact("link", None)
    shown.play([PAUSE])
    assert "link" not in shown.rows()[1] and "· context 41%" in shown.rows()[1]


def test_an_agents_escape_sequences_are_shown_not_obeyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agent output is hostile on a terminal: a clear-screen, a carriage return over its own
    text, a title change are shown as text."""
    shown = Shown(monkeypatch)
    shown.play(["safe\x1b[2J\x1b]0;owned\x07", "\rover"])
    shown.finish()
    assert shown.rows()[0] == "safe^[[2J^[]0;owned^G"
    assert shown.rows()[1] == "over"
    assert printable("a\r\nb\tc\x9bd\x7f") == "a\nb\tc\\x9bd^?"


def test_the_column_follows_wrapping_as_xterm_does() -> None:
    assert advance(0, "abc", 10) == 3
    assert advance(0, "0123456789", 10) == 10  # full: waiting to wrap
    assert advance(10, "a", 10) == 1
    assert advance(9, "漢", 10) == 2  # a wide character wraps early
    assert advance(0, "e\u0301", 10) == 1
    assert advance(3, "\t", 10) == 8 and advance(8, "\t", 10) == 9
    column = AnswerColumn(on_screen=True)
    column.wrote("abc\ndefg")
    assert column.at(80) == 4 and column.at(3) == 1  # counted again at another width
    assert AnswerColumn(on_screen=False).at(80) == 0


def scripts() -> st.SearchStrategy[list[str | None]]:
    pieces = st.sampled_from([*"ab c\n漢字😀", "e\u0301"])
    text = st.lists(pieces, min_size=1, max_size=30).map("".join)
    return st.lists(st.one_of(text, st.none()), max_size=20)


@settings(max_examples=150, deadline=None)
@given(script=scripts(), columns=st.integers(min_value=6, max_value=30))
def test_every_streamed_character_is_on_the_final_screen(
    script: list[str | None], columns: int
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        shown = Shown(monkeypatch, columns=columns, rows=6)
        shown.play(script)
        shown.finish()
        final = "".join(shown.rows())
    assert visible(final) == visible("".join(s for s in script if s is not None))
    assert "|" not in final


@pytest.fixture(autouse=True)
def _no_ambient_columns(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("COLUMNS", raising=False)
    yield


# In a real pseudo-terminal: `acpctl run` against an agent that streams with pauses.

SENTENCE = [
    (0.4, "Hello from the slow"),  # a pause before the line: the status at column 0
    (0.4, " mock model, streaming in pieces"),  # and inside it
    (0.4, " with pauses between them.\n"),
    (0.4, "漢字 e\u0301t\u00e9 😀"),  # after a line, then wide and combining characters
    (0.4, " 1 2 3"),
]
EXPECTED = "".join(text for _, text in SENTENCE)


def paced_agent(tmp_path: Path) -> None:
    script = write_executable(
        tmp_path / "paced.sh",
        "#!/bin/sh\nFAKE_AGENT_MODE=paced "
        f"FAKE_CHUNKS={shlex.quote(json.dumps(SENTENCE))} "
        f"exec {sys.executable} {TEST_AGENTS / 'fake_agent.py'}\n",
    )
    cli("agents", "add", "paced", "--", str(script))


class PseudoTerminal:
    """A program on a pseudo-terminal of `columns` × `rows`, its screen kept by pyte."""

    def __init__(self, argv: list[str], cwd: Path, columns: int = 60, rows: int = 20) -> None:
        self.controller, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        self.process = subprocess.Popen(
            argv, stdin=follower, stdout=follower, stderr=follower, cwd=cwd, env=env
        )
        os.close(follower)
        self.screen = XtermScreen(columns, rows, history=1000)
        self.stream = pyte.ByteStream(self.screen)
        self.seen = b""
        self.mark = 0  # where the last text waited for ends

    def until(self, text: bytes, timeout: float = 30) -> None:
        """Until `text` is shown after what the last call waited for."""
        deadline = time.monotonic() + timeout
        while text not in self.seen[self.mark :]:
            ready, _, _ = select.select([self.controller], [], [], deadline - time.monotonic())
            assert ready, f"not shown: {text!r}; the screen: {self.rows()}"
            try:
                data = os.read(self.controller, 1 << 16)
            except OSError:  # the program ended and its terminal closed
                data = b""
            assert data, f"ended before {text!r}; the screen: {self.rows()}"
            self.seen += data
            self.stream.feed(data)
        self.mark = self.seen.index(text, self.mark) + len(text)

    def type(self, keys: bytes) -> None:
        os.write(self.controller, keys)

    def ended(self, timeout: float = 30) -> int:
        while True:
            ready, _, _ = select.select([self.controller], [], [], timeout)
            try:
                data = os.read(self.controller, 1 << 16) if ready else b""
            except OSError:
                data = b""
            if not data:
                break
            self.seen += data
            self.stream.feed(data)
        code = self.process.wait(timeout)
        os.close(self.controller)
        return code

    def rows(self) -> list[str]:
        columns = self.screen.columns
        old = ["".join(r[x].data for x in range(columns)) for r in self.screen.history.top]
        return [row.rstrip() for row in old + list(self.screen.display)]


def assert_whole(rows: list[str]) -> None:
    shown = "\n".join(rows)
    assert "Hello from the slow mock model" in shown, shown
    start = shown.index("Hello from")
    assert visible(shown[start:]).startswith(visible(EXPECTED)), shown
    assert "waiting for" not in shown and "working..." not in shown, shown


@pytest.mark.e2e
def test_run_on_a_terminal_shows_the_whole_answer(home: Path, tmp_path: Path) -> None:
    paced_agent(tmp_path)
    terminal = PseudoTerminal(acpctl_argv("run", "--agent", "paced", "hello"), tmp_path)
    assert terminal.ended() == 0
    assert b"working... " in terminal.seen  # the status line was there in the pauses
    assert_whole(terminal.rows())


@pytest.mark.e2e
def test_the_chat_through_the_host_shows_the_whole_answer(
    way: str, home: Path, tmp_path: Path
) -> None:
    paced_agent(tmp_path)
    terminal = PseudoTerminal(acpctl_argv("run", "--agent", "paced"), tmp_path)
    terminal.until(b"you> ")
    terminal.type(b"hello\n")
    terminal.until(b"1 2 3")
    terminal.until(b"you> ")
    terminal.type(b"\x04")  # Ctrl-D leaves
    assert terminal.ended() == 0
    assert_whole(terminal.rows())


@pytest.mark.e2e
@pytest.mark.parametrize("way", ["through the host"], indirect=True)
def test_sessions_attach_shows_the_whole_answer(way: str, home: Path, tmp_path: Path) -> None:
    paced_agent(tmp_path)
    first = subprocess.run(
        acpctl_argv("run", "--agent", "paced", "--format", "quiet", "start"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    [session] = json.loads(cli("sessions", "list", "--json").stdout)
    terminal = PseudoTerminal(acpctl_argv("sessions", "attach", session["id"]), tmp_path)
    terminal.until(b"you> ")
    terminal.type(b"hello\n")
    terminal.until(b"1 2 3")
    terminal.until(b"you> ")
    terminal.type(b"\x04")
    assert terminal.ended() == 0
    rows = terminal.rows()
    assert_whole(rows[next(i for i, row in enumerate(rows) if "you> hello" in row) :])


def test_the_context_windows_fill_is_a_fact_of_the_status_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43, 4: the fill a usage_update reports (used of size) on the status line; an
    update with only a cost says nothing of it."""
    shown = Shown(monkeypatch, columns=60)
    usage = {"sessionUpdate": acp.USAGE_UPDATE, "used": 82_000, "size": 200_000}
    shown.renderer.update(usage)
    shown.play(["partial", PAUSE])
    assert shown.rows()[1].endswith("· context 41% of 200k")
    shown.renderer.update({"sessionUpdate": acp.USAGE_UPDATE, "cost": {"amount": 1}})
    shown.play([PAUSE])
    assert shown.rows()[1].endswith("· context 41% of 200k")  # the cost alone changes nothing
    cost_only = Shown(monkeypatch, columns=60)
    cost_only.renderer.update({"sessionUpdate": acp.USAGE_UPDATE, "cost": {"amount": 1}})
    cost_only.play(["partial", PAUSE])
    assert "context" not in cost_only.rows()[1]


@pytest.mark.e2e
def test_a_question_left_waiting_is_the_person_not_the_agent_keeping_quiet(
    home: Path, tmp_path: Path
) -> None:
    """Issue 53, 5: while a permission waited unanswered, the terminal printed "demo has said
    nothing for 30 s; still waiting" on the choice> line: the agent was waiting for the
    person. The question is left open past the silence warning (1 s here), then answered."""
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("silence_warning_s = 1\n")
    terminal = PseudoTerminal(acpctl_argv("run", "--agent", "demo", "run: ls -la"), tmp_path)
    terminal.until(b"choice> ")
    left_open_until = time.monotonic() + 2.5  # the scenario: two silence warnings' worth
    while (left := left_open_until - time.monotonic()) > 0:
        ready, _, _ = select.select([terminal.controller], [], [], left)
        if ready:
            data = os.read(terminal.controller, 1 << 16)
            terminal.seen += data
            terminal.stream.feed(data)
    terminal.type(b"1\n")  # Allow
    assert terminal.ended() == 0
    assert b"has said nothing" not in terminal.seen, terminal.rows()
    assert "You said: run: ls -la" in "\n".join(terminal.rows())
