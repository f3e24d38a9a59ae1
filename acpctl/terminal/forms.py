"""The agent's questions (elicitation/create) answered at the terminal: a form, a field at
a time, or a URL to open. What the agent wrote is shown printable (screen.py); what the
person types is checked against the form's schema before it is sent.

The answer is ACP's: {"action": "accept", "content": {...}}, "decline" (the person said no)
or "cancel" (the terminal closed, or the mode is one acpctl does not know)."""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl.jsonrpc import JsonObject
from acpctl.terminal.screen import printable

# One line typed after a prompt; None at the input's end.
ReadLine = Callable[[str], Awaitable[str | None]]
Say = Callable[[str], None]

CANCEL: JsonObject = {"action": "cancel"}
DECLINE: JsonObject = {"action": "decline"}
YES = ("y", "yes")
NO = ("n", "no")


class Invalid(ValueError):
    """A typed value the field does not take; its message says what it takes."""


async def answer(params: JsonObject, read: ReadLine, say: Say) -> JsonObject:
    """Ask the person the agent's question; their answer as ACP's elicitation result."""
    mode = params.get("mode")
    say(f"\nThe agent asks: {printable(str(params.get('message') or ''))}")
    if mode == "url":
        return await _url(params, read, say)
    if mode != "form":
        say(f"  (a question of a kind acpctl cannot show: {printable(str(mode))}; cancelled)")
        return CANCEL
    schema = params.get("requestedSchema")
    schema = schema if isinstance(schema, dict) else {}
    fields = schema.get("properties")
    fields = fields if isinstance(fields, dict) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    choice = await _yes_no("Answer it?", read, say)
    if choice is None:
        return CANCEL
    if not choice:
        return DECLINE
    content: JsonObject = {}
    for name, field in fields.items():
        field = field if isinstance(field, dict) else {}
        value = await _field(str(name), field, str(name) in required, read, say)
        if value is _ENDED:
            return CANCEL
        if value is not _OMITTED:
            content[str(name)] = value
    return {"action": "accept", "content": content}


async def _url(params: JsonObject, read: ReadLine, say: Say) -> JsonObject:
    """A URL the person opens themselves: acpctl shows it, never opens it."""
    say(f"  Open this address in a browser: {printable(str(params.get('url') or ''))}")
    choice = await _yes_no("Will you open it?", read, say)
    if choice is None:
        return CANCEL
    return {"action": "accept"} if choice else DECLINE


async def _yes_no(question: str, read: ReadLine, say: Say) -> bool | None:
    while True:
        line = await read(f"{question} [y/n] ")
        if line is None:
            return None
        typed = line.strip().lower()
        if typed in YES or typed in NO:
            return typed in YES
        say("  type y or n")


_OMITTED = object()  # an optional field left empty
_ENDED = object()  # the input ended


async def _field(name: str, field: JsonObject, required: bool, read: ReadLine, say: Say) -> Any:
    """One field's value, asked until it is valid: Enter takes the default, or leaves an
    optional field out."""
    title = printable(str(field.get("title") or name))
    if isinstance(field.get("description"), str):
        say(f"  {printable(field['description'])}")
    choices = choices_of(field)
    for number, (_, label) in enumerate(choices, 1):
        say(f"    {number}) {printable(label)}")
    default = field.get("default")
    hint = f" [{printable(str(default))}]" if default is not None else ""
    hint += "" if required else " (optional)"
    while True:
        line = await read(f"  {title}{hint}: ")
        if line is None:
            return _ENDED
        typed = line.strip()
        if not typed:
            if default is not None:
                return default
            if not required:
                return _OMITTED
            say("  this field is required")
            continue
        try:
            return parse(field, typed, choices)
        except Invalid as exc:
            say(f"  {exc}")


def choices_of(field: JsonObject) -> list[tuple[str, str]]:
    """A select's values and their labels (enum, oneOf, or an array's items)."""
    source = field.get("items") if field.get("type") == "array" else field
    source = source if isinstance(source, dict) else {}
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        return [
            (str(o["const"]), str(o.get("title") or o["const"]))
            for o in options
            if isinstance(o, dict) and "const" in o
        ]
    values = source.get("enum")
    if isinstance(values, list):
        names = field.get("enumNames") if field.get("type") != "array" else None
        labels = names if isinstance(names, list) and len(names) == len(values) else values
        return [(str(value), str(label)) for value, label in zip(values, labels, strict=True)]
    return []


def parse(field: JsonObject, typed: str, choices: list[tuple[str, str]]) -> Any:
    """What the person typed, as the field's type; Invalid with what it takes."""
    kind = field.get("type")
    if kind == "boolean":
        if typed.lower() in YES or typed.lower() in NO:
            return typed.lower() in YES
        raise Invalid("type y or n")
    if kind in ("number", "integer"):
        return _number(field, typed, kind == "integer")
    if kind == "array":
        picked = [_pick(part.strip(), choices) for part in typed.split(",") if part.strip()]
        low, high = field.get("minItems"), field.get("maxItems")
        if isinstance(low, int) and len(picked) < low:
            raise Invalid(f"choose at least {low}")
        if isinstance(high, int) and len(picked) > high:
            raise Invalid(f"choose at most {high}")
        return picked
    if choices:
        return _pick(typed, choices)
    return _string(field, typed)


def _pick(typed: str, choices: list[tuple[str, str]]) -> str:
    if typed.isdigit() and 1 <= int(typed) <= len(choices):
        return choices[int(typed) - 1][0]
    raise Invalid(f"type a number from 1 to {len(choices)}")


def _number(field: JsonObject, typed: str, integer: bool) -> int | float:
    try:
        value: int | float = int(typed) if integer else float(typed)
    except ValueError:
        raise Invalid("type a whole number" if integer else "type a number") from None
    if not math.isfinite(value):
        raise Invalid("type a finite number")
    low, high = field.get("minimum"), field.get("maximum")
    if isinstance(low, (int, float)) and value < low:
        raise Invalid(f"at least {low}")
    if isinstance(high, (int, float)) and value > high:
        raise Invalid(f"at most {high}")
    return value


def _string(field: JsonObject, typed: str) -> str:
    low, high = field.get("minLength"), field.get("maxLength")
    if isinstance(low, int) and len(typed) < low:
        raise Invalid(f"at least {low} characters")
    if isinstance(high, int) and len(typed) > high:
        raise Invalid(f"at most {high} characters")
    pattern = field.get("pattern")
    if isinstance(pattern, str):
        try:
            matches = re.search(pattern, typed) is not None
        except re.error:  # a JavaScript pattern Python cannot read: the agent checks it
            matches = True
        if not matches:
            raise Invalid(f"it must match {printable(pattern)}")
    return typed
