"""terminal/typed.py: one reader of the terminal for the chat's prompt and the agent's
questions, with the terminal's reads stood in for by a queue of typed lines."""

from __future__ import annotations

import asyncio
import queue

import pytest

from acpctl.terminal import typed


class Keyboard:
    """Lines typed, one per read; `shown` keeps the prompts the reads showed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.shown: list[str] = []
        monkeypatch.setattr(typed, "input", self._read, raising=False)
        monkeypatch.setattr(typed, "_line_after", self._read)
        monkeypatch.setattr(typed, "_show", self.shown.append)

    def _read(self, prompt: str) -> str:
        self.shown.append(prompt)
        line = self.lines.get(timeout=10)
        if line is None:
            raise EOFError
        return line


@pytest.fixture
def keyboard(monkeypatch: pytest.MonkeyPatch) -> Keyboard:
    return Keyboard(monkeypatch)


async def _question_at_the_prompt(
    lines: typed.TypedLines, keyboard: Keyboard
) -> tuple[asyncio.Future[str], asyncio.Future[str | None]]:
    """The chat's prompt up, then a question asked: both reading."""
    chat = asyncio.ensure_future(lines.chat_line("you> "))
    await _soon(lambda: keyboard.shown == ["you> "])
    question = asyncio.ensure_future(lines.answer_line("choice> "))
    await _soon(lambda: keyboard.shown == ["you> ", "choice> "])
    return chat, question


async def _soon(condition: object) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not in time")


def test_a_question_asked_at_the_chats_prompt_takes_the_next_line(keyboard: Keyboard) -> None:
    lines = typed.TypedLines()

    async def scenario() -> None:
        chat, question = await _question_at_the_prompt(lines, keyboard)
        keyboard.lines.put("1")
        assert await question == "1"
        assert not chat.done()
        await _soon(lambda: keyboard.shown[-1] == "you> ")  # the chat's prompt again
        keyboard.lines.put("hello")
        assert await chat == "hello"

    asyncio.run(scenario())


def test_a_forms_fields_are_read_in_a_row_before_the_chat_reads_again(keyboard: Keyboard) -> None:
    lines = typed.TypedLines()

    async def form() -> list[str | None]:
        return [await lines.answer_line("name: "), await lines.answer_line("excited? ")]

    async def scenario() -> None:
        chat = asyncio.ensure_future(lines.chat_line("you> "))
        await _soon(lambda: keyboard.shown == ["you> "])
        asked = asyncio.ensure_future(form())
        keyboard.lines.put("Ada")
        await _soon(lambda: keyboard.shown[-1] == "excited? ")
        keyboard.lines.put("y")
        assert await asked == ["Ada", "y"]
        keyboard.lines.put("next")
        assert await chat == "next"
        assert keyboard.shown == ["you> ", "name: ", "excited? ", "you> "]

    asyncio.run(scenario())


def test_a_question_dropped_gives_the_next_line_to_the_chat(keyboard: Keyboard) -> None:
    lines = typed.TypedLines()

    async def scenario() -> None:
        chat, question = await _question_at_the_prompt(lines, keyboard)
        question.cancel()  # answered elsewhere
        await _soon(lambda: keyboard.shown[-1] == "you> ")
        keyboard.lines.put("/quit")
        assert await chat == "/quit"

    asyncio.run(scenario())


def test_at_the_inputs_end_a_question_gets_none_and_the_chat_eof(keyboard: Keyboard) -> None:
    lines = typed.TypedLines()

    async def scenario() -> None:
        question = asyncio.ensure_future(lines.answer_line("choice> "))
        await _soon(lambda: keyboard.shown == ["choice> "])
        chat = asyncio.ensure_future(lines.chat_line("you> "))
        keyboard.lines.put(None)
        assert await question is None
        keyboard.lines.put(None)
        with pytest.raises(EOFError):
            await chat

    asyncio.run(scenario())
