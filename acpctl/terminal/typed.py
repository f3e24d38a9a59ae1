"""What the person types at the terminal: one reader of stdin, shared by the chat's prompt
and the agent's questions.

Two threads reading one terminal split its lines between them at random. Here a line
goes to the agent's question when one is asked (the oldest first), else to the chat: a
question asked while the chat's prompt waits (another client's turn, in `sessions
attach`) takes the next line typed, and the chat gets the one after. A question dropped
because it was answered elsewhere gives its turn back: the next line is the chat's.

Each line is read in a daemon thread: a read still waiting when acpctl exits (a question
answered elsewhere at the end of a one-shot `run`) does not hold the exit up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from dataclasses import dataclass


@dataclass
class _Reader:
    prompt: str
    line: asyncio.Future[str]  # EOFError at the input's end
    chat: bool


class TypedLines:
    def __init__(self) -> None:
        self._questions: list[_Reader] = []  # the oldest first
        self._chat: _Reader | None = None
        self._reading: _Reader | None = None  # whose prompt the read in flight showed

    async def chat_line(self, prompt: str) -> str:
        """The chat's next line, read with line editing and history (readline); EOFError
        at the input's end."""
        return await self._read(prompt, chat=True)

    async def answer_line(self, prompt: str) -> str | None:
        """The next line, for a question; None at the input's end."""
        try:
            return await self._read(prompt, chat=False)
        except EOFError:
            return None

    async def _read(self, prompt: str, chat: bool) -> str:
        reader = _Reader(prompt, asyncio.get_running_loop().create_future(), chat)
        if chat:
            self._chat = reader
        else:
            self._questions.append(reader)
            if self._reading is not None and self._reading.chat:
                _show(prompt)  # the chat's read is in flight: its line is this question's
        if self._reading is None:
            self._read_next()
        try:
            return await reader.line
        finally:
            if chat:
                self._chat = None
            elif reader in self._questions:
                self._questions.remove(reader)
                if self._chat is not None and self._reading is not None:
                    _show(self._chat.prompt)  # dropped: the next line is the chat's again

    def _read_next(self) -> None:
        reader = self._questions[0] if self._questions else self._chat
        if reader is None or self._reading is not None:
            return
        self._reading = reader
        loop = asyncio.get_running_loop()

        def read() -> None:
            try:
                line: str | BaseException = (
                    input(reader.prompt) if reader.chat else _line_after(reader.prompt)
                )
            except (EOFError, OSError) as exc:
                line = EOFError(str(exc))
            with contextlib.suppress(RuntimeError):  # the loop is gone: acpctl exits
                loop.call_soon_threadsafe(self._delivered, reader, line)

        threading.Thread(target=read, name="typed line", daemon=True).start()

    def _delivered(self, read_for: _Reader, line: str | BaseException) -> None:
        self._reading = None
        to = self._questions[0] if self._questions else self._chat
        if to is not None and not to.line.done():
            if read_for.chat and not to.chat and isinstance(line, str):
                _forget_in_history()  # an answer, not a prompt to find again
            if isinstance(line, BaseException):
                to.line.set_exception(line)
            else:
                to.line.set_result(line)
        # After the reader's task has run on: a form's next field asks at once, and its
        # prompt, not the chat's, shows for the next read.
        asyncio.get_running_loop().call_soon(self._read_next)


def _line_after(prompt: str) -> str:
    """A line typed after `prompt`, shown on the terminal, never on stdout: stdout carries
    the transcript, often into a file."""
    _show(prompt)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _show(prompt: str) -> None:
    try:
        with open(os.ttyname(sys.stdin.fileno()), "w") as tty:
            tty.write(prompt)
    except OSError:
        sys.stderr.write(prompt)
        sys.stderr.flush()


def _forget_in_history() -> None:
    with contextlib.suppress(ImportError, ValueError):
        import readline

        readline.remove_history_item(readline.get_current_history_length() - 1)


typed_lines = TypedLines()
