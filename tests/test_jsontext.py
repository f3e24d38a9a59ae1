"""The one decoder: msgspec reads what it can, json the rest, and no text reads differently
from how json alone reads it (the value, each number's type and digits, or the error)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acpctl import jsontext

# JSON values with what tells decoders apart: integers past 64 bits, floats at the ends of
# their range, -0.0, every code point (lone surrogates included, which only json accepts),
# equal keys, nesting.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


def typed(value: Any) -> Any:
    """The value with each number's type and exact digits, so that 1 and 1.0, or 0.0 and
    -0.0, which compare equal, read as different; and each object's keys in order."""
    if isinstance(value, dict):
        return ("object", [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (type(value).__name__, repr(value))
    return value


def json_alone(data: str | bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What decode_text gives with msgspec refusing everything: the value, or the error's
    type and words."""
    with monkeypatch.context() as patched:
        patched.setattr(jsontext, "decode_fast", refuse)
        return outcome(data)


def refuse(data: str | bytes) -> Any:
    raise ValueError("refused")


def outcome(data: str | bytes) -> Any:
    try:
        return typed(jsontext.decode_text(data))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


def texts_of(value: Any) -> list[str]:
    """The ways a peer writes a value: compact, spaced, with or without escapes, and with
    blanks around it."""
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    spaced = json.dumps(value, ensure_ascii=True, indent=1)
    return [compact, spaced, f" {compact}\t\r\n", f"{compact}\u00a0"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_every_json_text_reads_as_json_alone_reads_it(value: Any) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        for text in texts_of(value):
            expected = json_alone(text, monkeypatch)
            assert outcome(text) == expected
            data = text.encode("utf-8", "surrogatepass")
            assert outcome(data) == json_alone(data, monkeypatch)
        assert outcome(texts_of(value)[0]) == typed(value)  # and that is the value itself


@settings(max_examples=300, deadline=None)
@given(VALUES, st.data())
def test_a_broken_text_reads_as_json_alone_reads_it(value: Any, data: st.DataObject) -> None:
    """Bytes cut, dropped or changed anywhere: the same value or the same error."""
    line = bytearray(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(line)))
        change = data.draw(st.sampled_from(["cut", "drop", "put"]))
        if change == "cut":
            del line[at:]
        elif change == "drop":
            del line[at : at + 1]
        else:
            line[at:at] = data.draw(
                st.sampled_from([b"\\", b'"', b"}", b"\xff", b"1e999", b"\x01"])
            )
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert outcome(bytes(line)) == json_alone(bytes(line), monkeypatch)


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890",  # past 64 bits: exact, not a float
        "-9223372036854775809",
        "1e2",  # a float, as json reads it
        "1e-400",  # rounds to 0.0
        "1e999",  # refused: it would be Infinity
        "NaN",
        '"\\ud800"',  # a lone surrogate: JSON allows it
        "[" * 100_000,  # nested too deeply
        "1" * 5000,  # more digits than an int may have
        '{"a":1,"b":2,"a":3}',  # the last value wins, in the first one's place
        "{} x",  # extra data
        '"\x01"',  # a raw control character
    ],
)
def test_the_texts_decoders_differ_on(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = json_alone(text, monkeypatch)
    assert outcome(text) == expected
    assert outcome(text.encode()) == json_alone(text.encode(), monkeypatch)


def test_bytes_that_are_not_utf8_are_refused_as_such() -> None:
    with pytest.raises(UnicodeDecodeError):
        jsontext.decode_text(b'"\xc3\x28"')
