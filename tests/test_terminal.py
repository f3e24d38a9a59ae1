"""Issue 10: `acpctl run` in the terminal, against the demo agent and an SDK agent."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from acpctl import protocol as acp
from tests.acp_peer import connect, initialized
from tests.conftest import TEST_AGENTS, acpctl_argv, cli, run, run_cli, write_executable
from tests.raw_peer import raw_editor

pytestmark = pytest.mark.e2e


def terminal(
    *args: str, stdin: str | None = None, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        acpctl_argv("run", *args),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(os.environ),
    )


def test_one_shot_streams_the_answer(home: Path, tmp_path: Path) -> None:
    result = terminal("think and plan: hello", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "The user wants an echo" in result.stdout and "Plan:" in result.stdout
    assert result.stdout.rstrip().endswith("You said: think and plan: hello")


def test_piped_stdin_joins_the_prompt_and_json_output(home: Path, tmp_path: Path) -> None:
    result = terminal(
        "--format", "json", "review this", "-", stdin="diff --git a b\n", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1]["stopReason"] == "end_turn"
    # The session, for a script's next `run --session ID` (issue 45, 6).
    assert cli("sessions", "show", lines[-1]["sessionId"]).returncode == 0
    text = "".join(u["content"]["text"] for u in lines[:-1])
    assert text == "You said: review this diff --git a b"


def test_quiet_prints_only_the_final_text(home: Path, tmp_path: Path) -> None:
    result = terminal("--format", "quiet", "think hello", cwd=tmp_path)
    assert result.stdout == "You said: think hello\n"


def test_terminal_turns_land_in_the_shared_store(home: Path, tmp_path: Path) -> None:
    async def from_editor() -> str:
        async with connect() as (conn, _, _):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("from the editor")])
            return str(sid)

    sid = asyncio.run(from_editor())
    assert terminal("--continue", "from the shell", cwd=tmp_path).returncode == 0
    assert terminal("--session", sid[:8], "by prefix", cwd=tmp_path).returncode == 0

    async def back_in_editor() -> list[str]:
        async with connect() as (conn, _, client):
            await initialized(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            return [
                u.content.text
                for u in client.updates[sid]
                if u.session_update == "user_message_chunk"
            ]

    assert asyncio.run(back_in_editor()) == ["from the editor", "from the shell", "by prefix"]


def test_unknown_session_prefix_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    result = terminal("--session", "zzz", "hi", cwd=tmp_path)
    assert result.returncode == 2 and "no stored session" in result.stderr


def test_permission_policies(home: Path, tmp_path: Path) -> None:
    allowed = terminal("--approve-all", "edit please", cwd=tmp_path)
    assert allowed.returncode == 0 and "[completed]" in allowed.stdout
    default = terminal("edit please", cwd=tmp_path)  # no terminal: reads only
    assert default.returncode == 5 and "[failed]" in default.stdout
    assert "denied by --approve-reads" in default.stderr  # issue 17: it says why, and how
    assert "--approve-all allows" in default.stderr
    denied = terminal("--deny-all", "edit please", cwd=tmp_path)
    assert denied.returncode == 5


class AskedOnATerminal:
    """`acpctl ARGS` with a terminal for its stdin (its questions are typed there) and its
    stdout and stderr piped."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.leader, follower = pty.openpty()
        self.process = subprocess.Popen(
            acpctl_argv(*args),
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        os.close(follower)
        self.seen = b""

    def answer(self, after: bytes, typed: bytes) -> None:
        """Once the terminal shows `after`, type `typed`."""
        deadline = time.monotonic() + 30
        while after not in self.seen and time.monotonic() < deadline:
            ready, _, _ = select.select([self.leader], [], [], 0.5)
            if ready:
                self.seen += os.read(self.leader, 1024)
        assert after in self.seen, self.seen
        self.seen = b""
        os.write(self.leader, typed)

    def ended(self) -> tuple[bytes, bytes]:
        out, err = self.process.communicate(timeout=30)
        os.close(self.leader)
        return out, err


def test_permission_asked_on_a_terminal(home: Path, tmp_path: Path) -> None:
    terminal = AskedOnATerminal("run", "edit please", cwd=tmp_path)
    terminal.answer(b"choice>", b"1\n")
    out, err = terminal.ended()
    assert b"The agent asks permission" in err
    assert terminal.process.returncode == 0 and b"[completed]" in out


def test_the_agents_questions_are_answered_on_a_terminal(home: Path, tmp_path: Path) -> None:
    """Issue 43, 2: a form a field at a time, then a URL shown, never opened; without a
    terminal acpctl does not say it can answer, and the agent does not ask."""
    asked = AskedOnATerminal("run", "ask and visit", cwd=tmp_path)
    asked.answer(b"Answer it? [y/n]", b"y\n")
    asked.answer(b"Your name", b"Ada\n")
    asked.answer(b"Excited?", b"yes\n")
    asked.answer(b"Will you open it?", b"y\n")
    out, err = asked.ended()
    process = asked.process
    assert process.returncode == 0, err
    assert b"The agent asks: What should the demo call you?" in err
    assert b"Open this address in a browser: https://example.com/acpctl-demo" in err
    assert b"Hello, Ada!" in out and b"Thanks for visiting." in out
    (session,) = json.loads(run_cli("sessions", "list", "--json").stdout)
    shown = run_cli("sessions", "show", session["id"]).stdout
    assert "answered: accept (name='Ada', excited=True), by acpctl" in shown
    piped = terminal("ask", cwd=tmp_path)
    assert piped.returncode == 0 and "(Your client cannot answer questions.)" in piped.stdout


def test_fs_and_terminal_requests_are_served(home: Path, tmp_path: Path) -> None:
    agent = write_executable(
        tmp_path / "sdk-agent", f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'sdk_agent.py'}\n"
    )
    assert run_cli("agents", "add", "sdk", "--", str(agent)).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("hello file\n")
    files = terminal("--agent", "sdk", "--format", "quiet", f"files {work}", cwd=work)
    assert files.returncode == 0, files.stderr
    assert (work / "out.txt").read_text() == "HELLO FILE\n"
    assert "[outside refused: -32602]" in files.stdout
    term = terminal("--agent", "sdk", "--format", "quiet", "term", cwd=work)
    assert term.stdout.strip() == "sdk: term [hello exit=0]"


def test_sigint_cancels_the_turn(home: Path, tmp_path: Path) -> None:
    process = subprocess.Popen(
        acpctl_argv("run", "slow"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
        b'"type":"agent"' in p.read_bytes()
        for p in (home / "data" / "sessions").glob("*/events.jsonl")
    ):
        time.sleep(0.05)  # until the stream has started
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "[cancelled]" in err and out.startswith("You")
    assert out.count("slow") < 10  # the stream (20 chunks) stopped early


def test_timeout_exits_3(home: Path, tmp_path: Path) -> None:
    result = terminal("--timeout", "0.5", "slow", cwd=tmp_path)
    assert result.returncode == 3 and "timed out after 0.5 s (--timeout)" in result.stderr
    assert "Ctrl-C" not in result.stderr  # nobody pressed it
    logs = sorted((home / "state" / "logs").glob("*.log"))
    assert "acpctl run closed the connection" in logs[-1].read_text()
    unknown = run_cli("logs", "--run", "1")
    assert unknown.returncode == 2 and "acpctl logs --list" in unknown.stderr


def test_usage_errors(home: Path, tmp_path: Path) -> None:
    assert terminal("--format", "xml", "hi").returncode == 2
    assert terminal("--approve-all", "--deny-all", "hi").returncode == 2
    assert terminal().returncode == 2  # no prompt, nothing piped, no terminal
    assert terminal("--agent", "nosuch", "hi").returncode == 2


def test_chat_loop_on_a_terminal(home: Path, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        acpctl_argv("run"), stdin=follower, stdout=follower, stderr=follower, cwd=tmp_path
    )
    os.close(follower)
    seen = b""
    mark = 0  # what was already matched: each wait looks only at newer output

    def until(needle: bytes) -> None:
        nonlocal seen, mark
        deadline = time.monotonic() + 30
        while needle not in seen[mark:] and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(leader, 4096)
                except OSError:
                    break
        assert needle in seen[mark:], seen[-500:]
        mark = seen.index(needle, mark) + len(needle)

    until(b"you> ")
    os.write(leader, b"first message\n")
    until(b"You said: first message")
    until(b"you> ")
    os.write(leader, b"second message\n")
    until(b"You said: second message")
    until(b"you> ")
    os.write(leader, b"\x04")  # Ctrl-D leaves
    assert process.wait(30) == 0
    os.close(leader)
    sessions = [
        p
        for p in (home / "data" / "sessions").iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]
    assert len(sessions) == 1
    assert json.loads((sessions[0] / "session.json").read_text())["turns"] == 2


def test_no_color_and_force_color_are_honoured_everywhere(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: FORCE_COLOR colours piped output; NO_COLOR wins over it; in acpctl's own
    renderer and in rich's tables and reports alike."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    forced = terminal("think hello", cwd=tmp_path)
    assert "\033[" in forced.stdout
    assert "\033[" in run_cli("agents", "list").stdout
    monkeypatch.setenv("NO_COLOR", "1")
    plain = terminal("think hello", cwd=tmp_path)
    assert "\033[" not in plain.stdout and "You said: think hello" in plain.stdout
    assert "\033[" not in run_cli("agents", "list").stdout
    assert "\033[" not in run_cli("doctor").stdout


def test_an_empty_prompt_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    """Issue 17: `echo "" | acpctl run` is not sent to the agent."""
    empty = terminal(stdin="\n", cwd=tmp_path)
    assert empty.returncode == 2 and "the prompt on stdin is empty" in empty.stderr
    assert not (home / "data" / "sessions").exists() or not [
        p for p in (home / "data" / "sessions").iterdir() if not p.name.startswith(".")
    ]


class ChatOnATerminal:
    """`acpctl run --agent demo` (the chat) on a pseudo-terminal; the terminal's end stays
    open, so its settings can be read once the chat is gone."""

    def __init__(self, *args: str) -> None:
        self.controller, self.terminal = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acpctl", "run", *(args or ("--agent", "demo"))],
            stdin=self.terminal,
            stdout=self.terminal,
            stderr=self.terminal,
            env=dict(os.environ),
            close_fds=True,
        )

    def until(self, text: bytes) -> bytes:
        """The screen up to `text` (30 s at most)."""
        seen = b""
        while text not in seen:
            ready, _, _ = select.select([self.controller], [], [], 30)
            assert ready, f"not shown: {text!r}; the screen: {seen!r}"
            seen += os.read(self.controller, 4096)
        return seen

    def type(self, line: bytes) -> None:
        os.write(self.controller, line + b"\n")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        os.close(self.controller)
        os.close(self.terminal)


@pytest.mark.e2e
def test_ctrl_c_at_the_chat_prompt_leaves_the_terminal_echoing_and_exits_130(home: Path) -> None:
    """Issue 31, 1: os._exit while readline held the terminal left it at -echo, exit 0."""
    import termios

    chat = ChatOnATerminal()
    try:
        chat.until(b"you> ")
        chat.process.send_signal(signal.SIGINT)
        assert chat.process.wait(30) == 130
        assert termios.tcgetattr(chat.terminal)[3] & termios.ECHO  # lflag: echo is on again
    finally:
        chat.close()


@pytest.mark.e2e
def test_the_chat_has_its_own_help_and_quit(home: Path) -> None:
    """Issue 31, 16: /help went to the agent. acpctl's /help, /commands and /quit."""
    chat = ChatOnATerminal()
    try:
        chat.until(b"you> ")
        chat.type(b"/help")
        assert b"You said" not in chat.until(b"/quit      leave")  # not sent to the agent
        chat.type(b"/commands")
        chat.until(b"commands")
        chat.type(b"/quit")
        assert chat.process.wait(30) == 0
    finally:
        chat.close()


def test_an_agent_that_fails_to_start_is_explained_where_it_fails(
    home: Path, tmp_path: Path
) -> None:
    """Issue 31, 3: the failure's cause, as doctor would name it (from the agent's last
    stderr lines), in the terminal's message and in the editor's JSON-RPC error, with the
    fix; not only "exited with status 1"."""
    agent = tmp_path / "agent.py"
    agent.write_text("import acpctl_no_such_module\n")
    cli("agents", "add", "mine", "--", sys.executable, str(agent))
    failed = terminal("--agent", "mine", "hello", cwd=tmp_path)
    assert failed.returncode == 1
    said = failed.stderr
    assert "No module named 'acpctl_no_such_module'" in said, said
    assert "cannot import a module it needs" in said and "install the module" in said

    async def editor() -> dict[str, Any]:
        async with raw_editor("--agent", "mine") as peer:
            answer: dict[str, Any] = await peer.call(acp.INITIALIZE, {"protocolVersion": 1})
            return answer

    answer = run(editor())
    error = answer["error"]
    assert "during initialize: a Python agent cannot import a module" in error["message"]
    assert error["data"]["diagnosis"]["id"] == "python-module-missing"
    assert error["data"]["exitStatus"] == 1


@pytest.mark.e2e
def test_a_status_line_shows_while_the_agent_works_and_is_gone_before_the_answer(
    home: Path, tmp_path: Path
) -> None:
    """Issue 31, 2: on a terminal, while the agent is quiet, a spinner with what it does
    and the time so far, on stderr; erased before the answer is written; with NO_COLOR no
    colour code (it may still move the cursor: tests/test_status_line.py); on a pipe, none
    at all."""
    script = write_executable(
        tmp_path / "quiet.sh",
        f"#!/bin/sh\nFAKE_SILENCE_S=1.2 FAKE_AGENT_MODE=silent exec {sys.executable} "
        f"{TEST_AGENTS / 'fake_agent.py'}\n",
    )
    cli("agents", "add", "quiet", "--", str(script))
    os.environ["NO_COLOR"] = "1"
    try:
        shown = ChatOnATerminal("--agent", "quiet", "hello")
        try:
            screen = shown.until(b"0.9s")  # the status, counting
            assert shown.process.wait(30) == 0
            screen += os.read(shown.controller, 1 << 16)
        finally:
            shown.close()
    finally:
        del os.environ["NO_COLOR"]
    assert b"waiting for the agent... " in screen
    last = screen.rindex(b"waiting for the agent")
    assert b"\r\x1b[K" in screen[last:], screen[last:]  # erased before the end
    assert not re.search(rb"\x1b\[[0-9;]*m", screen)
    piped = terminal("--agent", "quiet", "hello", cwd=tmp_path)
    assert piped.returncode == 0 and "waiting for the agent" not in piped.stderr
