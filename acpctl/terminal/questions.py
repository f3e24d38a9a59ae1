"""The agent's questions asked of the person at the terminal: a permission (a numbered
choice of the agent's options) and an elicitation (a form or a URL, terminal/forms.py).
Questions go to the terminal that stdin is, never to stdout: stdout carries the
transcript, often into a file; their lines are read before the chat's (terminal/typed.py)."""

from __future__ import annotations

import sys

from acpctl.jsonrpc import JsonObject
from acpctl.terminal import forms
from acpctl.terminal.screen import approvable, printable
from acpctl.terminal.typed import typed_lines


async def ask_on_terminal(params: JsonObject) -> str | None:
    """Ask the person at the terminal; returns the chosen optionId (None: cancel)."""
    options = [o for o in params.get("options") or [] if isinstance(o, dict)]
    tool = params.get("toolCall") or {}
    title = approvable(str(tool.get("title") or tool.get("kind") or "a tool call"))
    say(f"\nThe agent asks permission: {title}")
    raw = tool.get("rawInput")
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, list):
        command = " ".join(map(str, command))
    if isinstance(command, str):  # what runs, whole, whatever the title says
        say(f"  $ {approvable(command)}")
    for place in tool.get("locations") or []:
        if isinstance(place, dict) and isinstance(place.get("path"), str):
            say(f"  at {approvable(place['path'])}")
    for index, option in enumerate(options, 1):
        name, kind = (printable(str(option.get(key))) for key in ("name", "kind"))
        say(f"  {index}) {name} [{kind}]")
    while True:
        answer = await read_line("choice> ")
        if answer is None:
            return None
        if answer.strip().isdigit() and 1 <= int(answer) <= len(options):
            return str(options[int(answer) - 1]["optionId"])
        say(f"  type a number from 1 to {len(options)}")


async def elicit_on_terminal(params: JsonObject) -> JsonObject:
    """The agent's question (elicitation/create) answered at the terminal."""
    return await forms.answer(params, read_line, say)


def say(text: str) -> None:
    print(text, file=sys.stderr)


async def read_line(prompt: str) -> str | None:
    """One line typed at the terminal after `prompt` (None at its end), taken before the
    chat's prompt gets another (terminal/typed.py)."""
    return await typed_lines.answer_line(prompt)
