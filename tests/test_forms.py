"""Issue 43, 2: the terminal answers the agent's questions: forms a field at a time, checked
against their schema, and URLs shown (never opened); the agent's text shown printable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acpctl.jsonrpc import JsonObject
from acpctl.terminal import forms

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "colour": {
            "type": "string",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
        },
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2},
        "excited": {"type": "boolean", "default": False},
        "note": {"type": "string"},
    },
    "required": ["name", "age", "colour"],
}


def answered(params: JsonObject, typed: list[str | None]) -> tuple[JsonObject, list[str]]:
    """The answer the form gets when the person types `typed` (None: the input ends), and
    what was said to them (prompts included)."""
    said: list[str] = []
    lines = iter(typed)

    async def read(prompt: str) -> str | None:
        said.append(prompt)
        return next(lines)

    return asyncio.run(forms.answer(params, read, said.append)), said


def test_a_form_is_filled_in_field_by_field_until_each_value_is_valid() -> None:
    params = {"mode": "form", "message": "Who are you?", "requestedSchema": SCHEMA}
    typed: list[str | None] = [
        "y",
        "A",
        "Ada",
        "old",
        "200",
        "36",
        "3",
        "2",
        "1, 3, 2",
        "1,3",
        "",
        "",
    ]
    answer, said = answered(params, typed)
    assert answer == {
        "action": "accept",
        "content": {
            "name": "Ada",
            "age": 36,
            "colour": "g",
            "tags": ["a", "c"],
            "excited": False,  # the default, taken with Enter
        },  # the optional note left out
    }
    assert "  at least 2 characters" in said
    assert "  type a whole number" in said and "  at most 150" in said
    assert "  type a number from 1 to 2" in said and "  choose at most 2" in said
    assert "    2) Green" in said


@pytest.mark.parametrize(
    ("typed", "action"), [(["n"], "decline"), ([None], "cancel"), (["y", "Ada", None], "cancel")]
)
def test_a_form_declined_or_left_is_said_so(typed: list[str | None], action: str) -> None:
    params = {"mode": "form", "message": "Who?", "requestedSchema": SCHEMA}
    assert answered(params, typed)[0] == {"action": action}


def test_a_url_is_shown_never_opened_and_agent_text_is_printable() -> None:
    params = {
        "mode": "url",
        "message": "Sign in\x1b]0;owned\x07",
        "url": "https://example.com/\x1b[2J",
        "elicitationId": "e1",
    }
    answer, said = answered(params, ["yes"])
    assert answer == {"action": "accept"}
    assert not any("\x1b" in line for line in said)
    assert "  Open this address in a browser: https://example.com/^[[2J" in said
    assert answered(params, ["no"])[0] == {"action": "decline"}


def test_a_mode_acpctl_does_not_know_is_cancelled_unshown() -> None:
    answer, said = answered({"mode": "_vendor/camera", "message": "Smile"}, [])
    assert answer == {"action": "cancel"}
    assert any("cannot show" in line for line in said)


@pytest.mark.parametrize(
    ("field", "typed", "value"),
    [
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "boolean"}, "Y", True),
        ({"type": "string", "pattern": "^[a-z]+$"}, "abc", "abc"),
        ({"type": "string", "pattern": "(?<=x"}, "any", "any"),  # not Python's: the agent checks
        ({"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]}, "2", "y"),
    ],
)
def test_a_value_is_taken_as_its_fields_type(field: JsonObject, typed: str, value: Any) -> None:
    assert forms.parse(field, typed, forms.choices_of(field)) == value


@pytest.mark.parametrize(
    ("field", "typed"),
    [
        ({"type": "number"}, "nan"),
        ({"type": "number"}, "inf"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "ABC"),
        ({"type": "string", "maxLength": 2}, "abc"),
        ({"type": "boolean"}, "maybe"),
    ],
)
def test_a_value_the_field_does_not_take_is_refused(field: JsonObject, typed: str) -> None:
    with pytest.raises(forms.Invalid):
        forms.parse(field, typed, forms.choices_of(field))
